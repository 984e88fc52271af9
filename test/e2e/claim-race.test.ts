/**
 * The two claims behind "one migration in flight per environment" and "one runner per migration",
 * under the interleavings that concurrent processes can produce. Real processes hit these windows
 * only rarely (microseconds wide), so the test replays them deterministically: node:fs is wrapped
 * so that, at the chosen instant inside one claimer, a second claimer runs to its end, exactly as
 * another process scheduled there would. The property checked is the plain one: at most one of the
 * two claims succeeds.
 */

import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { claimEnvironment } from '../../engine/runner/active-claim.js';
import { claimRunner } from '../../engine/runner/runner-claim.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { tempDir } from '../support/cli.js';

/** Runs once, just before the wrapped call on the given file. */
interface Interleave {
  op: 'unlinkSync' | 'writeSync';
  file: string;
  run: () => void;
}

const hooks = vi.hoisted(() => ({ pending: null as Interleave | null, fdPaths: new Map<number, string>() }));

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const fire = (op: Interleave['op'], file: string | undefined) => {
    const hook = hooks.pending;
    if (hook && hook.op === op && hook.file === file) {
      hooks.pending = null;
      hook.run();
    }
  };
  const wrapped = {
    ...actual,
    openSync: ((file: string, ...rest: unknown[]) => {
      const fd = (actual.openSync as (...args: unknown[]) => number)(file, ...rest);
      hooks.fdPaths.set(fd, String(file));
      return fd;
    }) as typeof actual.openSync,
    writeSync: ((fd: number, ...rest: unknown[]) => {
      fire('writeSync', hooks.fdPaths.get(fd));
      return (actual.writeSync as (...args: unknown[]) => number)(fd, ...rest);
    }) as typeof actual.writeSync,
    unlinkSync: ((file: string) => {
      fire('unlinkSync', String(file));
      actual.unlinkSync(file);
    }) as typeof actual.unlinkSync,
  };
  return { ...wrapped, default: wrapped };
});

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  hooks.pending = null;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function workdir(): Promise<string> {
  const { dir, cleanup } = await tempDir('cutover-claim-race-');
  cleanups.push(cleanup);
  return dir;
}

/** The pid of a process that has exited (and been reaped): a crashed claimer. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '0']);
  return child.pid as number;
}

describe('environment claim (active.json)', () => {
  it('two migrations replacing the same stale claim: at most one gets the environment', async () => {
    const stateDir = StateDir.at(await workdir());
    const file = stateDir.activeFile('crash');
    mkdirSync(path.dirname(file), { recursive: true });
    // Left by a migrate that crashed before writing its journal: stale, so it may be replaced.
    const stale = { migrationId: 'mig_old', claimedAt: 0, claimedBy: { pid: deadPid(), startTime: null } };
    writeFileSync(file, `${JSON.stringify(stale)}\n`);
    const isFinished = () => false;

    let other: ReturnType<typeof claimEnvironment> | undefined;
    // Another migrate runs its whole claim between this one reading the stale claim and deleting it.
    hooks.pending = {
      op: 'unlinkSync',
      file,
      run: () => {
        other = claimEnvironment(stateDir, 'crash', 'mig_other', isFinished);
      },
    };
    const mine = claimEnvironment(stateDir, 'crash', 'mig_mine', isFinished);
    other ??= claimEnvironment(stateDir, 'crash', 'mig_other', isFinished);

    const holder = JSON.parse(readFileSync(file, 'utf8')).migrationId;
    const winners = [mine.ok && 'mig_mine', other.ok && 'mig_other'].filter(Boolean);
    expect({ winners, holder }).toEqual({ winners: [holder], holder });
  });
});

describe('runner claim (runner.json)', () => {
  it('two runners taking over a dead runner: at most one drives the migration', async () => {
    const dir = await workdir();
    const file = path.join(dir, 'runner.json');
    const dead = {
      migrationId: 'mig_x',
      port: 1,
      token: 't',
      startedAt: 0,
      process: { pid: deadPid(), startTime: null },
    };
    writeFileSync(file, `${JSON.stringify(dead)}\n`);
    const record = { migrationId: 'mig_x', port: 2, token: 'u', startedAt: 1 };

    let other: ReturnType<typeof claimRunner> | undefined;
    // Another runner takes over between this one reading the dead record and deleting it.
    hooks.pending = {
      op: 'unlinkSync',
      file,
      run: () => {
        other = claimRunner(file, { ...record, port: 3 });
      },
    };
    const mine = claimRunner(file, record);
    other ??= claimRunner(file, { ...record, port: 3 });

    const winners = [mine?.port, other?.port].filter((p) => p !== undefined);
    expect(winners).toHaveLength(1);
  });

  it('a runner whose fresh claim is not written yet is not replaced by a second one', async () => {
    const dir = await workdir();
    const file = path.join(dir, 'runner.json');
    const record = { migrationId: 'mig_x', port: 2, token: 'u', startedAt: 1 };

    let other: ReturnType<typeof claimRunner> | undefined;
    // Another runner looks between this one creating runner.json and writing its record into it.
    hooks.pending = {
      op: 'writeSync',
      file,
      run: () => {
        other = claimRunner(file, { ...record, port: 3 });
      },
    };
    const mine = claimRunner(file, record);
    other ??= claimRunner(file, { ...record, port: 3 });

    const winners = [mine?.port, other?.port].filter((p) => p !== undefined);
    expect(winners).toHaveLength(1);
  });
});
