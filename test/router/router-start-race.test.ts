/**
 * Two starts of one state directory's router at once (a supervisor and a route step, or two
 * processes) leave one router, not a second that is still starting and takes the record, and the
 * routes' addresses, the moment the first dies (seen on a loaded CI run: a router killed by a test
 * was answering again, started by nobody; and a program that took the freed address found it in
 * use). Real routers, the real CLI.
 */
import { afterEach, expect, it } from 'vitest';
import { ensureRouter } from '../../engine/drivers/router-driver.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { liveRouterRecord } from '../../router/router-record.js';
import { runCli } from '../support/cli.js';
import { liveWorkspace, type Workspace } from '../support/migrations.js';
import { waitGone } from '../support/processes.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const ws of spaces.splice(0)) await ws.cleanup();
});

async function migrated(): Promise<Workspace & { url: string; id: string }> {
  const w = await liveWorkspace((y) => y.replace('shift: [10, 50, 100]', 'shift: [100]'));
  spaces.push(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stderr).toBe(0);
  return { ...w, id: /(mig_[0-9a-z]+)/.exec(first.stdout + first.stderr)?.[1] as string };
}

const startedPids = (lines: string[]) =>
  lines.flatMap((l) => /started the router .* \(pid (\d+)\)/.exec(l)?.[1] ?? []).map(Number);

it('a first migration starts its router once: the supervision does not start a second', async () => {
  const w = await migrated();
  const log = (await runCli(['topology', 'migration', 'logs', w.id, '-f', w.file])).stdout;
  expect(log.match(/started the router/g)?.length, log).toBe(1);
  expect(log).not.toContain('starting it again');
}, 60_000);

it('of two routers started at once, the one that lost the record is stopped', async () => {
  const w = await migrated();
  const stateDir = StateDir.at(w.stateDir);
  const first = liveRouterRecord(w.stateDir)?.pid as number;
  process.kill(first, 'SIGKILL');
  await waitGone(first);

  const lines: string[] = [];
  const log = (line: string) => lines.push(line);
  await Promise.all([ensureRouter(stateDir, log), ensureRouter(stateDir, log)]);
  const started = startedPids(lines);
  expect(started).toHaveLength(2);
  const holder = liveRouterRecord(w.stateDir)?.pid as number;
  expect(started).toContain(holder);
  // The router that won dies at once: the other start's router, stopped, does not take its place.
  process.kill(holder, 'SIGKILL');
  for (const pid of started) await waitGone(pid);
  expect(liveRouterRecord(w.stateDir)).toBeNull();
  expect(
    await fetch(w.url).then(
      (r) => r.status,
      () => 0,
    ),
  ).toBe(0);
}, 60_000);
