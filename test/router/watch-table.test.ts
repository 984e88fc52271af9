import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { watchTable } from '../../router/watch-table.js';
import { eventually, resourcesPerTest, stateDirFor } from './support.js';

// A file system without change notices (some network and container mounts): fs.watch throws.
vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const watch = () => {
    throw new Error('ENOSYS: watch not supported');
  };
  return { ...actual, watch, default: { ...actual, watch } };
});

const resources = resourcesPerTest();

describe('table watch without fs.watch', () => {
  it('notices a replaced table by polling', async () => {
    const dir = await stateDirFor(resources);
    const file = path.join(dir, 'routes.json');
    let changes = 0;
    let quietPolls = 0; // polls that found the file as they last saw it
    const watch = watchTable(
      file,
      () => changes++,
      () => {
        quietPolls++;
        return false;
      },
      50,
    );
    resources.add(() => watch.stop());

    writeFileSync(`${file}.tmp`, '{}');
    writeFileSync(file, '{"version": 1}');
    await eventually(() => changes === 1, 2_000);
    const before = quietPolls;
    await eventually(() => quietPolls >= before + 3, 2_000);
    expect(changes).toBe(1); // three polls saw the unchanged file and did not report it again
  });
});
