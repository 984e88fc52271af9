import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../../core/topology/load-topology.js';
import { topologyText } from '../../../core/topology/topology-text.js';
import { repoRoot } from '../../support/cli.js';

/** Every topology file the project ships: examples and test fixtures (the invalid example aside). */
function shippedTopologies(): string[] {
  const files: string[] = [];
  for (const base of ['examples', 'test/fixtures']) {
    const dir = path.join(repoRoot, base);
    for (const entry of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
      if (/(^|\/)[^/]*\.ya?ml$/.test(entry) && !entry.includes('broken') && !entry.includes('.github')) {
        files.push(path.join(dir, entry));
      }
    }
  }
  return files;
}

describe('topologyText', () => {
  const loaded = shippedTopologies()
    .map((file) => ({ file, result: loadTopology(readFileSync(file, 'utf8'), { file }) }))
    .filter((l) => l.result.ok);

  it('finds topologies to write back', () => {
    expect(loaded.length).toBeGreaterThan(5);
  });

  it('writes a model back as a file that loads to the same model, durations as text', () => {
    for (const { file, result } of loaded) {
      if (!result.ok) continue;
      const text = topologyText(result.topology);
      const again = loadTopology(text, { file: `${file} (written back)` });
      expect(again.ok ? [] : again.diagnostics, file).toEqual([]);
      if (again.ok) expect(again.topology, file).toEqual(result.topology);
    }
  });
});
