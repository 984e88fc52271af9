/** A route's tls and h2c settings: the model, defaults, round trip, located errors. */
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../../core/topology/load-topology.js';
import { topologyText } from '../../../core/topology/render-topology.js';

const file = (route: string, drivers = '') => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
${drivers}components:
  api: { driver: apps, version: "1", run: { command: [node, app.js] } }
routes:
  web:
    listen: 127.0.0.1:8443
    to: api
${route}
`;
const apps = 'drivers:\n  apps: { type: process }\n  edge: { type: nginx, configFile: nginx.conf }\n';

function problems(route: string): string[] {
  const result = loadTopology(file(route, apps), { file: 'topology.yaml' });
  return result.ok ? [] : result.diagnostics.map((d) => `${d.line} ${d.path}: ${d.message}`);
}

describe('route tls', () => {
  it('normalises with TLS 1.2, HTTP/2 and no HSTS by default, and renders back to the same model', () => {
    const minimal = loadTopology(file('    tls: { certificates: [{ cert: a.pem, key: a.key }] }', apps), {
      file: 't',
    });
    if (!minimal.ok) throw new Error(JSON.stringify(minimal.diagnostics));
    expect(minimal.topology.routes.web?.tls).toEqual({
      certificates: [{ cert: 'a.pem', key: 'a.key' }],
      http2: true,
      minVersion: 'TLSv1.2',
    });
    const full = loadTopology(
      file(
        [
          '    tls:',
          '      certificates: [{ cert: a.pem, key: a.key }, { cert: b.pem, key: b.key }]',
          '      minVersion: TLSv1.3',
          '      http2: false',
          '      redirectHttp: 127.0.0.1:8080',
          '      hsts: { maxAge: 24h, includeSubDomains: true }',
        ].join('\n'),
        apps,
      ),
      { file: 't' },
    );
    if (!full.ok) throw new Error(JSON.stringify(full.diagnostics));
    expect(full.topology.routes.web?.tls?.hsts).toEqual({
      maxAge: 86_400_000,
      includeSubDomains: true,
      preload: false,
    });
    const again = loadTopology(topologyText(full.topology, 'recorded'), { file: 'recorded' });
    expect(again.ok && again.topology).toEqual(full.topology);
  });

  it('refuses, by line and field: TLS on nginx, h2c with TLS, an old version, a redirect on a taken address', () => {
    expect(
      problems('    driver: edge\n    tls: { certificates: [{ cert: a.pem, key: a.key }] }\n    h2c: true'),
    ).toEqual([
      '14 routes.web.tls: only the built-in router serves TLS; driver "edge" is of type nginx',
      '15 routes.web.h2c: h2c is HTTP/2 without TLS: over tls, HTTP/2 is offered by ALPN (tls.http2)',
      '15 routes.web.h2c: only the built-in router serves h2c; driver "edge" is of type nginx',
    ]);
    expect(
      problems(
        '    tls: { certificates: [{ cert: a.pem, key: a.key }], minVersion: TLSv1.1, hsts: { maxAge: 0s } }',
      ),
    ).toEqual([
      '13 routes.web.tls.minVersion: must be one of: TLSv1.2, TLSv1.3',
      '13 routes.web.tls.hsts.maxAge: must be at least 1s',
    ]);
    expect(
      problems(
        '    preview: 127.0.0.1:8081\n    tls: { certificates: [{ cert: a.pem, key: a.key }], redirectHttp: 127.0.0.1:8081 }',
      ),
    ).toEqual([
      '14 routes.web.tls.redirectHttp: address 127.0.0.1:8081 is already used by routes.web.preview',
    ]);
  });
});
