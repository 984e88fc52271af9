/**
 * `env` values may refer to a dependency: `{ ref: db, format: "postgres://app@{host}:{port}/app" }`.
 * The loader checks them with located errors; the model keeps the format (default `{address}`);
 * resolution writes the addresses of the dependency's slot into it.
 */
import { describe, expect, it } from 'vitest';
import {
  formatReference,
  resolveReferences,
  unknownPlaceholders,
} from '../../../core/topology/dependency-refs.js';
import { loadTopology } from '../../../core/topology/load-topology.js';
import { topologyText } from '../../../core/topology/render-topology.js';

const file = (env: string, dependsOn = '[db]') => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
drivers: { apps: { type: process } }
components:
  db:
    driver: apps
    version: "1"
    run: { command: [node, db.js] }
  cache:
    driver: apps
    version: "1"
    run: { command: [node, cache.js] }
  api:
    driver: apps
    version: "1"
    run: { command: [node, api.js] }
    dependsOn: ${dependsOn}
    env:
${env}
`;

function problems(env: string, dependsOn?: string): string[] {
  const result = loadTopology(file(env, dependsOn), { file: 'topology.yaml' });
  return result.ok
    ? []
    : result.diagnostics.map((d) => `${d.file}:${d.line}:${d.column} ${d.path}: ${d.message}`);
}

describe('references to dependencies in env', () => {
  it('accepts { ref, format } beside plain values and secrets; the model fills in the default format', () => {
    const env = [
      '      DATABASE_URL: { ref: db, format: "postgres://app@{host}:{port}/app" }',
      '      DB: { ref: db }',
      '      PASSWORD: { secret: DB_PASSWORD }',
      '      LOG_LEVEL: info',
    ].join('\n');
    const result = loadTopology(file(env), { file: 'topology.yaml' });
    expect(result.ok ? [] : result.diagnostics).toEqual([]);
    if (!result.ok) return;
    expect(result.topology.components.api?.env).toEqual({
      DATABASE_URL: { format: 'postgres://app@{host}:{port}/app', ref: 'db' },
      DB: { format: '{address}', ref: 'db' },
      LOG_LEVEL: 'info',
      PASSWORD: { secret: 'DB_PASSWORD' },
    });
    // A recorded layout's file loads back to the same model, references included.
    const again = loadTopology(topologyText(result.topology, 'layout'), { file: 'layout' });
    expect(again.ok && again.topology).toEqual(result.topology);
  });

  it('refuses a reference to a component that is not a dependency, naming file, line and field', () => {
    expect(problems('      CACHE_URL: { ref: cache }')).toEqual([
      'topology.yaml:20:25 components.api.env.CACHE_URL.ref: component "cache" is not in dependsOn of api: add it there (a reference reaches only a dependency, which is stood up first)',
    ]);
    expect(problems('      DATABASE_URL: { ref: dbb }')).toEqual([
      'topology.yaml:20:28 components.api.env.DATABASE_URL.ref: unknown component "dbb"; did you mean "db"? (a reference names a component in dependsOn of api)',
    ]);
    expect(problems('      SELF: { ref: api }')).toEqual([
      'topology.yaml:20:20 components.api.env.SELF.ref: a component cannot refer to itself',
    ]);
    // Without dependsOn at all, every reference is refused.
    expect(problems('      DATABASE_URL: { ref: db }', '[]')).toEqual([
      expect.stringContaining(
        'components.api.env.DATABASE_URL.ref: component "db" is not in dependsOn of api',
      ),
    ]);
  });

  it('refuses an unknown placeholder, with a did-you-mean', () => {
    expect(problems('      DATABASE_URL: { ref: db, format: "postgres://{hots}:{port}/{name}" }')).toEqual([
      'topology.yaml:20:40 components.api.env.DATABASE_URL.format: unknown placeholder {hots}; did you mean {host}? (known: {host}, {port}, {address}, {addresses})',
      'topology.yaml:20:40 components.api.env.DATABASE_URL.format: unknown placeholder {name} (known: {host}, {port}, {address}, {addresses})',
    ]);
    // Braces that are no placeholder are text: JSON in a format is fine.
    expect(unknownPlaceholders('{"url": "http://{address}/"}')).toEqual([]);
  });

  it('refuses unknown keys and a ref that is not a name', () => {
    expect(problems('      DATABASE_URL: { ref: db, fromat: "{address}" }')).toEqual([
      expect.stringMatching(
        /components\.api\.env\.DATABASE_URL\.fromat: unknown key; did you mean "format"\? \(allowed here: ref, format\)$/,
      ),
    ]);
    expect(problems('      DATABASE_URL: { ref: DB }')).toEqual([
      expect.stringMatching(/components\.api\.env\.DATABASE_URL\.ref: must be lower-case letters/),
    ]);
  });

  it('a hook has no dependencies: its env refuses a reference', () => {
    const text = `${file('      LOG_LEVEL: info')}strategy:
  hooks:
    preRollout:
      - name: smoke
        command: [./smoke.sh]
        env: { URL: { ref: db } }
`;
    const result = loadTopology(text, { file: 'topology.yaml' });
    expect(result.ok).toBe(false);
    expect(result.ok ? [] : result.diagnostics.map((d) => d.path)).toContain(
      'strategy.hooks.preRollout[0].env.URL.ref',
    );
  });
});

describe('formatting a reference', () => {
  const addresses = ['127.0.0.1:5001', '127.0.0.1:5002'];

  it('fills {host}, {port}, {address} from the first replica and {addresses} from all', () => {
    expect(formatReference('postgres://app@{host}:{port}/app', addresses)).toBe(
      'postgres://app@127.0.0.1:5001/app',
    );
    expect(formatReference('{address}', addresses)).toBe('127.0.0.1:5001');
    expect(formatReference('{addresses}', addresses)).toBe('127.0.0.1:5001,127.0.0.1:5002');
    // An IPv6 host keeps its brackets, as a URL needs them.
    expect(formatReference('http://{host}:{port}/', ['[::1]:8080'])).toBe('http://[::1]:8080/');
    expect(formatReference('{address}', [])).toBeNull();
  });

  it('resolves every reference of a component from its dependencies slots, or says why not', () => {
    const spec = {
      env: {
        A: { ref: 'db', format: 'http://{address}/' },
        B: { ref: 'queue', format: '{addresses}' },
        C: { ref: 'cache', format: '{address}' },
        D: 'plain',
      },
    };
    const resolved = resolveReferences('api', spec, {
      db: { slot: 'green', addresses: ['127.0.0.1:7000'] },
      queue: { slot: 'blue', addresses: [] },
    });
    expect(resolved.env).toEqual({ A: 'http://127.0.0.1:7000/' });
    expect(resolved.unresolved).toEqual([
      'env.B of component api refers to queue, whose blue slot reports no address',
      'env.C of component api refers to cache, which has no slot recorded',
    ]);
  });
});
