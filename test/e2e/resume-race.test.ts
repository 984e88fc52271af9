/**
 * `migration resume` when the runner it starts drives the migration to its end and exits before
 * `resume` looks for it: a migration killed with one short step left. On a loaded machine a real
 * runner lives that short a life between two of resume's looks (50 ms apart); before the fix
 * `resume` then said "cannot resume …: it has completed" and exited 1, though it had resumed the
 * migration and the migration had ended as it should (ci59: a stateful rollback, its switch back
 * abandoned at once by the new runner). The window is replayed deterministically: node:fs is
 * wrapped so that resume's look at the new runner's record waits until that runner has exited, as
 * a look scheduled just after its exit would. The migration and its runners are real processes.
 */
import { afterEach, expect, it, vi } from 'vitest';
import { replay } from '../../core/migration/step.js';
import { readJournal } from '../../engine/runner/journal.js';
import { killRunner, processExited, Sandbox, targetFile, waitFor } from './harness.js';

const hooks = vi.hoisted(() => ({
  /** The runner record whose reader waits for a new runner's exit; null when disarmed. */
  runnerFile: null as string | null,
  /** The runner that was killed (its record is read before the new one claims). */
  deadPid: 0,
  /** pids of new runners the look waited for. */
  waitedFor: [] as number[],
}));

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const exited = (pid: number): boolean => {
    try {
      const stat = actual.readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
    } catch {
      return true;
    }
  };
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const readFileSync = ((file: unknown, ...rest: unknown[]) => {
    const text = (actual.readFileSync as (...args: unknown[]) => string | Buffer)(file, ...rest);
    if (hooks.runnerFile === null || String(file) !== hooks.runnerFile) return text;
    const pid = (JSON.parse(String(text)) as { process: { pid: number } }).process.pid;
    if (pid === hooks.deadPid || exited(pid)) return text;
    // A new runner drives the migration: this look comes only once it has exited (the event loop
    // is held, as a process not scheduled until then would be).
    hooks.runnerFile = null;
    hooks.waitedFor.push(pid);
    const deadline = Date.now() + 20_000;
    while (!exited(pid) && Date.now() < deadline) Atomics.wait(pause, 0, 0, 5);
    return (actual.readFileSync as (...args: unknown[]) => string | Buffer)(file, ...rest);
  }) as typeof actual.readFileSync;
  const wrapped = { ...actual, readFileSync };
  return { ...wrapped, default: wrapped };
});

const sandboxes: Sandbox[] = [];
afterEach(async () => {
  hooks.runnerFile = null;
  for (const sb of sandboxes.splice(0)) await sb.cleanup();
});

it('resume picks up a migration whose new runner ends it before resume looks: exit 0, the migration completed', async () => {
  const sb = await Sandbox.create();
  sandboxes.push(sb);
  await sb.migrateBase();
  const id = await sb.migrateDetached({ SLOW_MS: 250 });
  const runnerFile = `${sb.migrationDir(id)}/runner.json`;
  const runner = await waitFor(`${id}'s runner`, () => sb.runner(id) ?? undefined);
  // The slow-exec migration journals 15 events; after the 14th, its last step (retiring blue a) runs.
  await waitFor(`${id}'s 14th event`, () => (sb.journalLineCount(id) >= 14 ? true : undefined), 30_000, 2);
  killRunner(runner);
  await waitFor(`runner ${runner.process.pid} to exit`, () =>
    processExited(runner.process.pid) ? true : undefined,
  );
  const atKill = replay(readJournal(sb.journalFile(id)).events);
  expect(atKill.lifecycle).not.toBe('completed');

  hooks.runnerFile = runnerFile;
  hooks.deadPid = runner.process.pid;
  const resumed = await sb.inProcess(['topology', 'migration', 'resume', id, '-f', targetFile]);
  expect(hooks.waitedFor, resumed.stdout + resumed.stderr).toHaveLength(1);
  expect(resumed.stderr).toContain(`${id} had no running process; a new one picked it up.`);
  expect(resumed.code, resumed.stderr).toBe(0);
  expect(resumed.stdout).toContain(`${id}: completed`);
  expect(replay(readJournal(sb.journalFile(id)).events).lifecycle).toBe('completed');
}, 60_000);
