/**
 * What a waiting `rollback`/`cancel`/`commit` prints: the log lines written after it was given,
 * whichever part of the log a later read returns. (The waiting itself runs through the real CLI in
 * migrate.test.ts, cli-remote.test.ts, test/modes and test/e2e/crash.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { newSince } from '../cli/commands/topology-migration.js';
import type { LogLine } from '../core/migration/types.js';

const line = (at: number, message: string): LogLine => ({ at, level: 'info', kind: 'driver', message });

describe('newSince', () => {
  const before = [line(1, 'a'), line(2, 'b'), line(3, 'c'), line(3, 'd')];
  const later = [line(3, 'e'), line(4, 'f'), line(5, 'g')];

  it('keeps only what was written after the first read, also in the same millisecond', () => {
    expect([...before, ...later].filter(newSince(before)).map((l) => l.message)).toEqual(['e', 'f', 'g']);
  });

  it('loses nothing when the later read starts further on (a Temporal log keeps its last lines)', () => {
    const capped = [...before, ...later].slice(3);
    expect(capped.filter(newSince(before)).map((l) => l.message)).toEqual(['e', 'f', 'g']);
  });

  it('prints everything of a log that was empty', () => {
    expect(later.filter(newSince([])).map((l) => l.message)).toEqual(['e', 'f', 'g']);
  });
});
