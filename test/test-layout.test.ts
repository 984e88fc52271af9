/**
 * Where tests live: under test/, mirroring the rooms (test/engine/drivers/ tests engine/drivers/),
 * never beside the code. vitest runs only test/**, so a test file beside the code would silently
 * never run; this check turns that into a failure.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './support/cli.js';
import { projectFiles } from './support/projects.js';

const rooms = ['core', 'platform', 'router', 'engine', 'views', 'cli', 'server', 'watch'];

describe('test layout', () => {
  it('keeps every test file under test/, none beside the code', () => {
    const beside = rooms.flatMap((room) =>
      readdirSync(path.join(repoRoot, room), { recursive: true, encoding: 'utf8' })
        .filter((file) => /\.test\.[cm]?[jt]s$/.test(file))
        .map((file) => path.join(room, file)),
    );
    expect(beside).toEqual([]);
  });

  it('puts every test file in exactly one vitest project (test/support/projects.ts)', () => {
    const files = readdirSync(path.join(repoRoot, 'test'), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.test.ts'))
      .map((file) => path.join('test', file));
    expect(files.length).toBeGreaterThan(100);
    const misplaced = files
      .map((file) => ({ file, projects: projectsOf(file) }))
      .filter(({ projects }) => projects.length !== 1);
    expect(misplaced).toEqual([]);
  });

  it('puts every file that replaces a module (vi.mock) in the isolated project', () => {
    // The unit and integration projects run many files in one process: a module mocked there would
    // miss modules an earlier file loaded with the real one, or reach the next file's.
    const files = readdirSync(path.join(repoRoot, 'test'), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.test.ts'))
      .map((file) => path.join('test', file));
    const mocking = files.filter((file) =>
      /\bvi\.(mock|doMock|unmock|doUnmock)\(/.test(readFileSync(path.join(repoRoot, file), 'utf8')),
    );
    expect(mocking.length).toBeGreaterThan(0);
    expect(mocking.filter((file) => projectsOf(file).join() !== 'isolated')).toEqual([]);
  });

  it('names a file in no project and a file in two', () => {
    expect(projectsOf('test/newfolder/thing.test.ts')).toEqual([]);
    expect(projectsOf('test/temporal/keep-earlier.test.ts')).toEqual(['unit']);
    expect(projectsOf('test/temporal/replay.test.ts')).toEqual(['temporal']);
    const overlapping = { ...projectFiles, extra: { include: ['test/core/**/*.test.ts'], exclude: [] } };
    expect(projectsOf('test/core/plan/plan-edges.test.ts', overlapping)).toEqual(['unit', 'extra']);
  });
});

/** The projects whose `include` matches `file` and whose `exclude` does not. */
function projectsOf(
  file: string,
  projects: Record<string, { include: string[]; exclude: string[] }> = projectFiles,
): string[] {
  return Object.entries(projects)
    .filter(([, { include, exclude }]) => picomatch(include)(file) && !picomatch(exclude)(file))
    .map(([name]) => name);
}
