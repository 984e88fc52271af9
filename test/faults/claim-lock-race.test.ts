/**
 * The claim lock (platform/claim-lock.ts) under the interleaving that once let two processes
 * in: a dead owner's lock is being removed by one process (R, this test process) while a second
 * (P1, a real process) removes it first and takes the lock, and a third (P3, a real process) comes
 * by. node:fs is wrapped in this process so that P1 and P3 act exactly at the chosen instants of
 * R. The property is the plain one: never two processes inside at once, and the lock never lost.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { sleepSync, withClaimLock } from '../../platform/claim-lock.js';
import { repoRoot, tempDir } from '../support/cli.js';

/** Runs once, right after the wrapped call on the given file returned. */
interface After {
  op: 'readFileSync' | 'renameSync';
  file: string;
  run: () => void;
}

const hooks = vi.hoisted(() => ({ after: [] as After[] }));

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const fire = (op: After['op'], file: unknown) => {
    const index = hooks.after.findIndex((h) => h.op === op && h.file === String(file));
    if (index === -1) return;
    const [hook] = hooks.after.splice(index, 1);
    hook?.run();
  };
  const wrapped = {
    ...actual,
    readFileSync: ((file: string, ...rest: unknown[]) => {
      const out = (actual.readFileSync as (...args: unknown[]) => unknown)(file, ...rest);
      fire('readFileSync', file);
      return out;
    }) as typeof actual.readFileSync,
    renameSync: ((from: string, to: string) => {
      actual.renameSync(from, to);
      fire('renameSync', from);
    }) as typeof actual.renameSync,
  };
  return { ...wrapped, default: wrapped };
});

const holder = path.join(repoRoot, 'test', 'fixtures', 'lock-holder', 'hold.mjs');
const children: ChildProcess[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  hooks.after = [];
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** Waits (blocking this process, as R would be inside its call) until a file exists. */
function waitFile(file: string, ms: number): boolean {
  const deadline = Date.now() + ms;
  while (!existsSync(file)) {
    if (Date.now() > deadline) return false;
    sleepSync(5);
  }
  return true;
}

describe('claim lock', () => {
  it("a lock re-taken while a dead owner's lock is being removed is neither stolen nor lost", async () => {
    const { dir, cleanup } = await tempDir('cutover-lock-race-');
    cleanups.push(cleanup);
    const file = path.join(dir, 'active.json');
    const lock = `${file}.lock`;
    mkdirSync(path.join(dir, 'inside'));
    // A lock left by a process that died inside its critical section.
    const dead = spawnSync(process.execPath, ['-e', '0']).pid as number;
    writeFileSync(lock, JSON.stringify({ pid: dead, startTime: null }));

    const start = (name: string) => {
      const child = spawn(process.execPath, [holder, file, name, dir], { stdio: 'ignore' });
      children.push(child);
    };
    // R has just read the dead owner: P1 removes that lock and takes its own (and holds it).
    hooks.after.push({
      op: 'readFileSync',
      file: lock,
      run: () => {
        start('p1');
        expect(waitFile(path.join(dir, 'held-p1'), 10_000)).toBe(true);
      },
    });
    // Should R move the lock aside, P3 comes by in that instant.
    let p3Started = false;
    hooks.after.push({
      op: 'renameSync',
      file: lock,
      run: () => {
        p3Started = true;
        start('p3');
        waitFile(path.join(dir, 'held-p3'), 1_500);
      },
    });

    const r = withClaimLock(
      file,
      () => {
        const others = readdirSync(path.join(dir, 'inside'));
        return others.length > 0 ? `entered while ${others} inside` : 'held';
      },
      () => 'busy',
    );
    // P1 still holds the lock: R must have been told busy, and a third process too.
    expect(r).toBe('busy');
    if (!p3Started) start('p3');
    writeFileSync(path.join(dir, 'release-p3'), '');
    expect(waitFile(path.join(dir, 'result-p3'), 10_000)).toBe(true);
    writeFileSync(path.join(dir, 'release-p1'), '');
    expect(waitFile(path.join(dir, 'result-p1'), 10_000)).toBe(true);

    const violation = existsSync(path.join(dir, 'violation'))
      ? readFileSync(path.join(dir, 'violation'), 'utf8')
      : '';
    expect({
      violation,
      p1: readFileSync(path.join(dir, 'result-p1'), 'utf8'),
      p3: readFileSync(path.join(dir, 'result-p3'), 'utf8'),
      lockLeft: existsSync(lock),
    }).toEqual({ violation: '', p1: 'held', p3: 'busy', lockLeft: false });
  }, 30_000);
});
