import { describe, expect, it } from 'vitest';
import { formatDiagnostic } from '../core/topology/diagnostic.js';
import { loadTopology } from '../core/topology/load-topology.js';
import { load, shopDoc, toYaml } from './support/builders.js';

function errors(text: string): string[] {
  const result = loadTopology(text, { file: 'topology.yaml' });
  if (result.ok) throw new Error('expected the topology to be invalid');
  return result.diagnostics.map(formatDiagnostic);
}

const header = 'apiVersion: cutover/v1\nkind: Topology\nmetadata:\n  name: shop\n';

describe('loading a topology file', () => {
  it('loads a valid file with defaults applied and durations in milliseconds', () => {
    const doc = shopDoc();
    doc.components.api = { ...doc.components.api, health: { http: { path: '/healthz' }, interval: '1m30s' } };
    const t = load(doc);
    expect(t.metadata.name).toBe('shop');
    expect(t.components.web?.replicas).toBe(1);
    expect(t.components.api?.health?.interval).toBe(90_000);
    expect(t.components.api?.health?.http?.expectStatus).toBe(200);
    expect(t.routes.public?.shift).toEqual([100]);
    expect(t.routes.public?.drain.timeout).toBe(30_000);
    expect(t.strategy).toEqual({ bake: 0, commit: 'auto' });
  });

  it('reports three distinct errors as three located lines', () => {
    const text = `${header}drivers:
  apps: { type: process }
components:
  api:
    driver: apps
    version: "1.0"
    run: { command: [node, api.js] }
    replicas: 0
    dependsOn: [dbb]
  db:
    driver: apps
    versoin: "16"
    run: { command: [db] }
`;
    expect(errors(text)).toEqual([
      'topology.yaml:12:15 components.api.replicas: must be >= 1',
      'topology.yaml:13:17 components.api.dependsOn[0]: unknown component "dbb"; did you mean "db"?',
      'topology.yaml:14:3 components.db.version: is required',
      expect.stringMatching(
        /^topology\.yaml:16:5 components\.db\.versoin: unknown key; did you mean "version"\?/,
      ),
    ]);
  });

  it('locates broken YAML syntax', () => {
    const [line, ...rest] = errors(`${header}components:\n  api: [unclosed\n`);
    expect(rest).toEqual([]);
    expect(line).toMatch(/^topology\.yaml:\d+:\d+: YAML syntax: /);
  });

  it('rejects duplicate keys with their path and where the first one is', () => {
    const text = `${header}components:\n  api: { driver: x, version: "1" }\n  api: { driver: x, version: "2" }\n`;
    expect(errors(text)).toEqual([
      'topology.yaml:7:3 components.api: duplicate key "api": the first is on line 6',
    ]);
    const nested = `${header}routes:\n  web:\n    listen: 127.0.0.1:1\n    to: a\n    to: b\n`;
    expect(errors(nested)).toEqual([
      'topology.yaml:9:5 routes.web.to: duplicate key "to": the first is on line 8',
    ]);
  });

  it('names a dependency cycle', () => {
    const doc = shopDoc();
    doc.components.db = { ...doc.components.db, dependsOn: ['web'] };
    expect(errors(toYaml(doc))).toEqual([expect.stringContaining('dependency cycle: api → db → web → api')]);
  });

  it('rejects dangling route targets, wrong driver kinds and clashing listen addresses', () => {
    const doc = shopDoc();
    doc.drivers.edge = { type: 'router' };
    doc.components.mailer = { ...doc.components.mailer, driver: 'edge' };
    doc.routes = {
      public: { listen: '127.0.0.1:18080', to: 'web' },
      admin: { listen: '0.0.0.0:18080', to: 'ap' },
    };
    const lines = errors(toYaml(doc));
    expect(lines).toHaveLength(3);
    expect(lines.join('\n')).toContain('components.mailer.driver: driver "edge" is of type router');
    expect(lines.join('\n')).toContain('routes.admin.to: unknown component "ap"; did you mean "api"?');
    expect(lines.join('\n')).toContain(
      'routes.admin.listen: address 0.0.0.0:18080 is already used by routes.public.listen',
    );
  });

  it('reads listen addresses as host and port, not as text: the same port written two ways clashes', () => {
    const doc = shopDoc();
    doc.routes = {
      public: { listen: '127.0.0.1:8080', to: 'web' },
      admin: { listen: '127.0.0.1:08080', to: 'api' },
      v6: { listen: '[::]:18081', to: 'api' },
      v6b: { listen: '[::1]:18081', to: 'web' },
      far: { listen: '127.0.0.1:99999', to: 'web' },
    };
    const lines = errors(toYaml(doc));
    expect(lines).toEqual([
      expect.stringMatching(
        / routes\.admin\.listen: address 127\.0\.0\.1:08080 is already used by routes\.public\.listen$/,
      ),
      expect.stringMatching(
        / routes\.v6b\.listen: address \[::1\]:18081 is already used by routes\.v6\.listen$/,
      ),
      expect.stringMatching(/ routes\.far\.listen: port 99999 is out of range 1-65535$/),
    ]);
  });

  it('checks stepped shifts and health probes', () => {
    const doc = shopDoc();
    doc.routes = { public: { listen: '127.0.0.1:18080', to: 'web', shift: [50, 10] } };
    doc.components.web = { ...doc.components.web, health: { interval: '1s' } };
    const lines = errors(toYaml(doc)).join('\n');
    expect(lines).toContain('routes.public.shift[1]: steps must increase');
    expect(lines).toContain('routes.public.shift[1]: the last step must be 100');
    expect(lines).toContain('components.web.health: needs one probe: http, tcp or command');
  });

  it('hints to quote a version written as a number', () => {
    const doc = shopDoc();
    doc.components.db = { ...doc.components.db, version: 16 };
    expect(errors(toYaml(doc))).toEqual([
      expect.stringContaining('components.db.version: must be a string; e.g. "16"'),
    ]);
  });

  it('quotes a number as it is written, not as YAML reads it (1.10 is the number 1.1)', () => {
    const doc = shopDoc();
    doc.components.db = { ...doc.components.db, version: 'PLACEHOLDER' };
    const text = toYaml(doc).replace(/version: "?PLACEHOLDER"?/, 'version: 1.10');
    expect(text).toContain('version: 1.10');
    expect(errors(text)).toEqual([
      expect.stringContaining('components.db.version: must be a string; e.g. "1.10"'),
    ]);
    doc.components.db = { ...doc.components.db, version: '15' };
    doc.components.api = {
      ...doc.components.api,
      health: { http: { path: '/healthz' }, interval: 'PLACEHOLDER' },
    };
    const duration = toYaml(doc).replace(/interval: "?PLACEHOLDER"?/, 'interval: 1.50');
    expect(errors(duration)).toEqual([
      expect.stringContaining('components.api.health.interval: must be a duration with a unit; e.g. "1.50s"'),
    ]);
  });

  it('says what a health check path must look like', () => {
    const doc = shopDoc();
    doc.components.api = { ...doc.components.api, health: { http: { path: 'healthz' } } };
    expect(errors(toYaml(doc))).toEqual([
      expect.stringContaining('components.api.health.http.path: must start with /, e.g. /healthz'),
    ]);
  });

  it('reads a route upstreamTimeout when given (none when not: plans stay as they were), refuses 0s', () => {
    expect(load(shopDoc()).routes.public?.upstreamTimeout).toBeUndefined();
    const withTimeout = (upstreamTimeout: string) => {
      const doc = shopDoc();
      doc.routes = { public: { listen: '127.0.0.1:18080', to: 'web', upstreamTimeout } };
      return doc;
    };
    expect(load(withTimeout('90s')).routes.public?.upstreamTimeout).toBe(90_000);
    const doc = withTimeout('0s');
    expect(errors(toYaml(doc))).toEqual([
      expect.stringContaining('routes.public.upstreamTimeout: must be longer than 0s'),
    ]);
  });

  it('reads a route bodyTimeout and queueTimeout when given (none when not), refuses 0s', () => {
    expect(load(shopDoc()).routes.public).not.toHaveProperty('bodyTimeout');
    expect(load(shopDoc()).routes.public).not.toHaveProperty('queueTimeout');
    const withTimeouts = (bodyTimeout: string, queueTimeout: string) => {
      const doc = shopDoc();
      doc.routes = { public: { listen: '127.0.0.1:18080', to: 'web', bodyTimeout, queueTimeout } };
      return doc;
    };
    const route = load(withTimeouts('15s', '2s')).routes.public;
    expect([route?.bodyTimeout, route?.queueTimeout]).toEqual([15_000, 2_000]);
    expect(errors(toYaml(withTimeouts('0s', '0s')))).toEqual([
      expect.stringContaining('routes.public.bodyTimeout: must be longer than 0s'),
      expect.stringContaining('routes.public.queueTimeout: must be longer than 0s'),
    ]);
  });

  it('says so when the file is empty', () => {
    expect(errors('')).toEqual([
      'topology.yaml:1:1: the file is empty; expected a topology (apiVersion: cutover/v1, kind: Topology, …)',
    ]);
  });

  it('accepts anchors, aliases and merge keys', () => {
    const text = `${header}drivers: { apps: { type: process } }
x-health: &health { http: { path: /healthz }, interval: 2s }
components:
  api: &base { driver: apps, version: "1", run: { command: [node, a.js] }, health: *health }
  web: { <<: *base, version: "2" }
`;
    // x-health is an unknown top-level key: anchors must live inside known fields.
    expect(errors(text)).toEqual([expect.stringContaining('x-health: unknown key')]);
    const t = load(
      text
        .replace(/^x-health: &health (.*)$/m, '')
        .replace('health: *health', 'health: &health { http: { path: /healthz }, interval: 2s }'),
    );
    expect(t.components.web?.version).toBe('2');
    expect(t.components.web?.health?.interval).toBe(2000);
  });

  it('refuses a billion-laughs alias bomb quickly', () => {
    const levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let i = 1; i < 10; i++) {
      const prev = String.fromCharCode(96 + i);
      const next = String.fromCharCode(97 + i);
      levels.push(`${next}: &${next} [${Array(9).fill(`*${prev}`).join(',')}]`);
    }
    const text = `${header}components:\n  bomb:\n    driver: x\n    version: "1"\n    env:\n${levels.map((l) => `      ${l}`).join('\n')}\n`;
    const started = performance.now();
    const lines = errors(text);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(lines.some((l) => l.includes('aliases expand to more than'))).toBe(true);
  });

  it('refuses a file over the size limit before parsing it', () => {
    const result = loadTopology(`${header}${'#'.repeat(2000)}\n`, { file: 'big.yaml', maxBytes: 1000 });
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(formatDiagnostic(result.diagnostics[0] as never)).toMatch(
        /^big\.yaml:1:1: file is \d+ bytes; the limit is 1000$/,
      );
  });
});

describe('locating many problems', () => {
  it('locates each of thousands of unknown keys in one map at its own line', () => {
    const head = ['apiVersion: cutover/v1', 'kind: Topology', 'metadata: { name: many }', 'components: {}'];
    const keys = Array.from({ length: 3000 }, (_, i) => `extra${i}: 1`);
    const text = [...head, ...keys].join('\n');
    const result = loadTopology(text, { file: 'many.yaml' });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const byPath = new Map(result.diagnostics.map((d) => [d.path, d.line]));
    expect(result.diagnostics).toHaveLength(3000);
    expect(byPath.get('extra0')).toBe(5);
    expect(byPath.get('extra1234')).toBe(1239);
    expect(byPath.get('extra2999')).toBe(3004);
  });
});
