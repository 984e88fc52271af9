import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../core/plan/canonical-json.js';
import { loadTopology } from '../../core/topology/load-topology.js';
import { toFile, topologySpecArb, toYaml } from './topology-arbitraries.js';

describe('the topology model', () => {
  // buildPlan hashes the desired model with plain JSON.stringify for speed; that is only sound
  // while normalize.ts keeps every object's keys in canonical (sorted) order.
  it('serialises to canonical JSON as it is', () => {
    fc.assert(
      fc.property(topologySpecArb.map(toFile), (file) => {
        const result = loadTopology(toYaml(file), { file: 'topology.yaml' });
        if (!result.ok) throw new Error(JSON.stringify(result.diagnostics));
        const plain = JSON.stringify(result.topology);
        const canonical = canonicalJson(result.topology);
        const at = [...plain].findIndex((ch, i) => ch !== canonical[i]);
        expect(plain.slice(Math.max(0, at - 80), at + 40)).toBe(
          canonical.slice(Math.max(0, at - 80), at + 40),
        );
      }),
      { numRuns: 200 },
    );
  });
});
