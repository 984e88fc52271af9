import { afterAll, beforeAll, expect, it } from 'vitest';
import { SelfHeal } from '../../engine/heal/self-heal.js';
import { noSecrets } from '../../engine/secrets/secret-source.js';
import { localService } from '../../engine/services/local-service.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { readRouterRecord } from '../../router/router-record.js';
import { runCli } from '../support/cli.js';
import { startTestLoad } from '../support/load.js';
import {
  isFinal,
  migrateDetached,
  routeUrl,
  setVersion,
  type Workspace,
  waitFor,
  workspace,
} from '../support/migrations.js';
import { waitGone } from '../support/processes.js';
import { eventually } from '../support/wait.js';

let w: Workspace;
let url: string;

beforeAll(async () => {
  w = await workspace('test/fixtures/canary', (yaml) =>
    yaml.replace('shift: [100]', 'shift: [{ weight: 50, hold: manual }, 100]'),
  );
  url = routeUrl(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  await runCli(['topology', 'down', '-f', w.file, '--yes']).catch(() => undefined);
  await w.cleanup();
}, 60_000);

/** Kills the router with SIGKILL; resolves with the pid of the one that took its place. */
async function killRouter(): Promise<{ killed: number; next: number }> {
  const killed = readRouterRecord(w.stateDir)?.pid as number;
  expect(killed).toBeGreaterThan(0);
  process.kill(killed, 'SIGKILL');
  await waitGone(killed);
  await eventually(() => {
    const record = readRouterRecord(w.stateDir);
    return record !== null && record.pid !== killed;
  }, 10_000);
  return { killed, next: readRouterRecord(w.stateDir)?.pid as number };
}

it('a router killed during a manual hold is started again by the runner, and the migration goes on', async () => {
  setVersion(w, 'web', '2.0.0');
  const id = await migrateDetached(w);
  await waitFor(w, id, (s) => s.lifecycle === 'awaiting_promotion', 30_000);
  const load = startTestLoad({ url, rate: 50 });
  const killedAt = Date.now();
  const { killed, next } = await killRouter();
  // Answering again, still in the hold: nothing but the supervision started it. Judged by the
  // load's own answers (a request sent after the kill answered 200), not by a request of this
  // process: ci26 stopped the load at this process's first 200, before the load (in a process of
  // its own) had one after the restart.
  const answeredAfterKill = () =>
    load.records.some((r) => r.status === 200 && load.origin + r.sentAt > killedAt);
  await eventually(answeredAfterKill, 10_000);
  const result = await load.stop();
  expect((await waitFor(w, id, () => true)).lifecycle).toBe('awaiting_promotion');
  const log = await runCli(['topology', 'migration', 'logs', id, '-f', w.file]);
  expect(log.stdout).toContain(`(pid ${killed} is gone) while routes are set; starting it again`);
  expect(log.stdout).toContain(`(pid ${next})`);
  // What clients saw: refused only between the kill and the restart (a few hundred ms at 50/s).
  const failed = result.records.filter((r) => r.status !== 200).length;
  console.log(`router killed in a hold: ${failed} of ${result.records.length} requests failed`);
  expect(result.records.some((r) => r.status === 200 && load.origin + r.sentAt > killedAt)).toBe(true);

  expect((await runCli(['topology', 'migration', 'promote', id, '-f', w.file])).code).toBe(0);
  expect((await waitFor(w, id, isFinal, 30_000)).lifecycle).toBe('completed');
  const body = (await (await fetch(url)).json()) as { version: string };
  expect(body.version).toBe('2.0.0');
}, 90_000);

it('between migrations, self-heal starts a killed router again at once', async () => {
  const lines: string[] = [];
  const heal = new SelfHeal({
    targets: async () => [
      {
        environment: 'canary',
        service: localService(StateDir.at(w.stateDir), noSecrets),
        fallbackBaseDir: w.dir,
      },
    ],
    intervalMs: 60_000, // no repair round would come in time: only the supervision can do it
    log: (line) => lines.push(line),
  });
  heal.start();
  try {
    await eventually(() => lines.some((l) => l.startsWith('self-heal: looking for drift')), 5_000);
    const { killed, next } = await killRouter();
    await eventually(async () => (await fetch(url).catch(() => null))?.status === 200, 10_000);
    expect(lines.join('\n')).toContain(
      `self-heal: the router for ${w.stateDir} is not running (pid ${killed} is gone)`,
    );
    expect(next).not.toBe(killed);
  } finally {
    await heal.stop();
  }
}, 60_000);
