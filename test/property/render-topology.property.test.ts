import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../core/topology/load-topology.js';
import { topologyText } from '../../core/topology/render-topology.js';
import { repoRoot } from '../support/cli.js';
import { toFile, topologySpecArb, toYaml } from './topology-arbitraries.js';

/** `cutover topology rollback` runs a recorded model again as text: it must load back to itself. */
function roundTrips(yaml: string): void {
  const first = loadTopology(yaml, { file: 'topology.yaml' });
  if (!first.ok) throw new Error(JSON.stringify(first.diagnostics));
  const again = loadTopology(topologyText(first.topology, 'layouts/3.json'), { file: 'layouts/3.json' });
  if (!again.ok) throw new Error(JSON.stringify(again.diagnostics));
  expect(again.topology).toEqual(first.topology);
  expect(JSON.stringify(again.topology)).toBe(JSON.stringify(first.topology));
}

describe('a model rendered back as a topology file', () => {
  it('loads back to the same model, for any valid topology', () => {
    fc.assert(
      fc.property(topologySpecArb.map(toFile), (file) => roundTrips(toYaml(file))),
      { numRuns: 300 },
    );
  });

  it('loads back to the same model, for every example', () => {
    const examples = path.join(repoRoot, 'examples');
    const files = readdirSync(examples, { recursive: true, encoding: 'utf8' }).filter(
      (f) => f.endsWith('.yaml') && !f.startsWith('broken') && !f.startsWith('ci'),
    );
    expect(files.length).toBeGreaterThan(5);
    for (const f of files) roundTrips(readFileSync(path.join(examples, f), 'utf8'));
  });
});
