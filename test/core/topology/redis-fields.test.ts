/** The redis driver's settings: the model, defaults, round trip, located errors. */
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../../core/topology/load-topology.js';
import { topologyText } from '../../../core/topology/render-topology.js';

const file = (
  driver: string,
  cache = '    driver: kv\n    version: "7"\n    stateful: true',
) => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
drivers:
  kv:
${driver}
components:
  cache:
${cache}
`;

function problems(driver: string, cache?: string): string[] {
  const result = loadTopology(file(driver, cache), { file: 'topology.yaml' });
  return result.ok ? [] : result.diagnostics.map((d) => `${d.line} ${d.path}: ${d.message}`);
}

describe('redis driver fields', () => {
  it('normalise with appendfsync everysec by default, and render back to the same model', () => {
    const full = loadTopology(file('    type: redis\n    appendfsync: always\n    bin: /opt/redis/bin'), {
      file: 't',
    });
    if (!full.ok) throw new Error(JSON.stringify(full.diagnostics));
    expect(full.topology.drivers.kv).toEqual({ appendfsync: 'always', bin: '/opt/redis/bin', type: 'redis' });
    const again = loadTopology(topologyText(full.topology, 'recorded'), { file: 'recorded' });
    expect(again.ok && again.topology).toEqual(full.topology);

    const minimal = loadTopology(file('    type: redis'), { file: 't' });
    if (!minimal.ok) throw new Error(JSON.stringify(minimal.diagnostics));
    expect(minimal.topology.drivers.kv).toEqual({ appendfsync: 'everysec', type: 'redis' });
  });

  it('refuses, by line and field: an unknown fsync policy, unknown keys, several replicas', () => {
    expect(problems('    type: redis\n    appendfsync: no\n    port: 6379')).toEqual([
      '7 drivers.kv.appendfsync: must be one of: always, everysec',
      '8 drivers.kv.port: unknown key (allowed here: type, runsOn, appendfsync, bin)',
    ]);
    expect(problems('    type: redis', '    driver: kv\n    version: "7"\n    replicas: 2')).toEqual([
      '11 components.cache.replicas: must be 1 for a component on a redis driver (one redis-server per slot)',
    ]);
  });
});
