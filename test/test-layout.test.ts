/**
 * Where tests live: under test/, mirroring the rooms (test/engine/drivers/ tests engine/drivers/),
 * never beside the code. vitest runs only test/**, so a test file beside the code would silently
 * never run; this check turns that into a failure.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './support/cli.js';

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
});
