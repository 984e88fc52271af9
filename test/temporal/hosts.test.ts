/**
 * Many machines on one Temporal cluster (issue 30): two `cutover worker` processes on one shared
 * task queue, each with its own state directory, as two machines would run. The topology places
 * the app's driver on host b and the router on host a: every call that touches a machine runs on
 * its host's worker, so each keeps its own records right, and migration after migration follows.
 * Real dev server, real workers, real app processes behind the real router, under load.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'vitest';
import { isAlive, type ProcessIdentity } from '../../platform/process-identity.js';
import { runCli } from '../support/cli.js';
import { liveWorkspace, setFileVersion, workspace } from '../support/migrations.js';
import {
  startWorkerProcess,
  temporalAddress,
  uniqueTaskQueue,
  type WorkerProcess,
} from '../support/temporal-worker.js';
import { eventually, waitUntil } from '../support/wait.js';
import { type TestScope, testScope } from './robustness-helpers.js';

type Cleanups = TestScope['cleanups'];

/**
 * `cutover worker --host NAME` (test/support/temporal-worker.ts) with a state directory of its own,
 * or `again`'s: the same machine back after a kill. Its SIGKILL (`kill`) leaves the state directory,
 * as a machine lost; its cleanup stops it and kills what it recorded there, by pid (`stop`).
 */
async function startHostWorker(
  cleanups: Cleanups,
  env: { WORKFLOW_HOST: string; TEMPORAL_TASK_QUEUE: string },
  host: string,
  again?: WorkerProcess,
): Promise<WorkerProcess> {
  const worker = await startWorkerProcess({
    address: env.WORKFLOW_HOST,
    taskQueue: env.TEMPORAL_TASK_QUEUE,
    host,
    stateDir: again?.stateDir,
  });
  cleanups.push(() => worker.stop());
  return worker;
}

/**
 * The live demo (test/support/migrations.ts `liveWorkspace`) under an environment name of its own,
 * the app's driver placed on host b and the route's router on host a; removed when the test ends.
 */
async function placedLiveDemo(
  cleanups: Cleanups,
  prefix: string,
): Promise<{ environment: string; w: Awaited<ReturnType<typeof liveWorkspace>> }> {
  const environment = `${prefix}-${process.pid}-${Date.now().toString(36)}`;
  const w = await liveWorkspace((y) =>
    y
      .replace('name: live-demo', `name: ${environment}`)
      .replace(
        'apps: { type: process, stopTimeout: 5s }',
        'apps: { type: process, stopTimeout: 5s, runsOn: b }\n  edge: { type: router, runsOn: a }',
      )
      .replace('to: web', 'to: web\n    driver: edge'),
  );
  cleanups.push(w.cleanup);
  return { environment, w };
}

/** Requests to `url` one after another until stopped: how many there were and which failed. */
function load(url: string): { stop(): Promise<{ total: number; failures: string[] }> } {
  let running = true;
  let total = 0;
  const failures: string[] = [];
  const loop = (async () => {
    while (running) {
      total += 1;
      try {
        const response = await fetch(url);
        await response.text();
        if (response.status !== 200) failures.push(`HTTP ${response.status}`);
      } catch (error) {
        failures.push((error as Error).message);
      }
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { total, failures };
    },
  };
}

/** Every replica the process driver recorded in a state directory for the environment. */
function recordedReplicas(stateDir: string, environment: string): ProcessIdentity[] {
  const dir = path.join(stateDir, 'environments', environment, 'slots');
  return slotsIn(stateDir, environment).flatMap(
    (slot) =>
      (JSON.parse(readFileSync(path.join(dir, slot, 'slot.json'), 'utf8')) as { replicas: ProcessIdentity[] })
        .replicas,
  );
}

/** The slots a state directory holds of the environment (the process driver's records). */
function slotsIn(stateDir: string, environment: string): string[] {
  const dir = path.join(stateDir, 'environments', environment, 'slots');
  return existsSync(dir) ? readdirSync(dir) : [];
}

describe.concurrent('two workers of one cluster, each with its own state directory', () => {
  it('app on host b, router on host a: three migrations and a down under load, every route following', async ({
    expect,
    onTestFinished,
  }) => {
    const { cleanups } = testScope(onTestFinished);
    const { environment, w } = await placedLiveDemo(cleanups, 'hosts');
    const env = { WORKFLOW_HOST: temporalAddress(), TEMPORAL_TASK_QUEUE: uniqueTaskQueue('hosts') };
    const a = await startHostWorker(cleanups, env, 'a');
    const b = await startHostWorker(cleanups, env, 'b');
    const cli = (args: string[]) => runCli([...args, '-f', w.file], { env });
    const served = async () => ((await (await fetch(w.url)).json()) as { version: string }).version;

    const first = await cli(['topology', 'migrate', '--yes']);
    expect(first.code, first.stderr).toBe(0);
    expect(await served()).toBe('1.0.0');
    const traffic = load(w.url);
    for (const [from, to] of [
      ['1.0.0', '2.0.0'],
      ['2.0.0', '3.0.0'],
    ] as const) {
      setFileVersion(w, from, to);
      // Observed on each host: the route on a (where its router serves), the app on b.
      const plan = await cli(['topology', 'plan']);
      expect(plan.code, plan.stderr).toBe(0);
      expect(plan.stdout).toContain('Hosts: component web on b, route www on a.');
      expect(plan.stdout).not.toContain('Changed outside of cutover');
      const next = await cli(['topology', 'migrate', '--yes']);
      expect(next.code, `${next.stdout}${next.stderr}`).toBe(0);
      expect(await served()).toBe(to);
    }
    const { total, failures } = await traffic.stop();
    expect(failures).toEqual([]);
    expect(total).toBeGreaterThan(10);
    // The app's replicas ran on b only, the router on a only: each kept its own records.
    expect(slotsIn(b.stateDir, environment).length).toBeGreaterThan(0);
    expect(slotsIn(a.stateDir, environment)).toEqual([]);
    expect(existsSync(path.join(a.stateDir, 'router', 'routes.json'))).toBe(true);
    expect(existsSync(path.join(b.stateDir, 'router'))).toBe(false);

    const router = JSON.parse(
      readFileSync(path.join(a.stateDir, 'router', 'router.json'), 'utf8'),
    ) as ProcessIdentity;
    const replicas = recordedReplicas(b.stateDir, environment);
    expect(replicas.length).toBeGreaterThan(0);
    const down = await cli(['topology', 'down', '--yes']);
    expect(down.code, `${down.stdout}${down.stderr}`).toBe(0);
    await expect(served()).rejects.toThrow();
    // Nothing left running: no replica recorded on b, nor a's router, idle once the route went.
    expect(replicas.filter(isAlive)).toEqual([]);
    // The router removes its record as it exits: its process may be a moment behind.
    expect(await waitUntil(() => !isAlive(router), 5_000)).toBe(true);
    // A host's worker of activities only is no warning (the SDK's "No workflows registered").
    expect(`${a.stderr()}${b.stderr()}`).not.toMatch(/WARN|No workflows registered/);
  }, 180_000);

  it('a host no worker polls: plan warns, migrate refuses, --allow-absent-hosts starts it and it runs once the worker comes', async ({
    expect,
    onTestFinished,
  }) => {
    const { cleanups } = testScope(onTestFinished);
    const { environment, w } = await placedLiveDemo(cleanups, 'absent');
    const taskQueue = uniqueTaskQueue('absent');
    const env = { WORKFLOW_HOST: temporalAddress(), TEMPORAL_TASK_QUEUE: taskQueue };
    await startHostWorker(cleanups, env, 'a');
    const cli = (args: string[]) => runCli([...args, '-f', w.file], { env });

    // Host a's worker is seen polling a moment after it started (Temporal lists a poller once its
    // first poll arrives: beside a CPU hog the first plan came before it, ci64): plan until it is.
    let plan = await cli(['topology', 'plan']);
    await eventually(
      async () => {
        if (plan.stdout.includes('no worker polls host a')) plan = await cli(['topology', 'plan']);
        return !plan.stdout.includes('no worker polls host a');
      },
      20_000,
      () => plan.stdout,
    );
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain('Warning: no worker polls host b now');

    const refused = await cli(['topology', 'migrate', '--yes']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `no cutover worker polls host b (task queue "${taskQueue}@b" at WORKFLOW_HOST=${env.WORKFLOW_HOST}): start \`cutover worker --host b\``,
    );
    expect(refused.stderr).toContain('--allow-absent-hosts');
    const none = await cli(['topology', 'migration', 'list', '--environment', environment, '--json']);
    expect(JSON.parse(none.stdout).items).toEqual([]);

    const started = await cli(['topology', 'migrate', '--yes', '--detach', '--allow-absent-hosts']);
    expect(started.code, started.stderr).toBe(0);
    const id = /mig_[0-9a-z]+/.exec(started.stdout)?.[0] as string;
    // Its provision waits in host b's queue, and show says so, until b's worker comes.
    const waiting = 'waiting for a worker on host b (none polling)';
    const shownDeadline = Date.now() + 30_000;
    let said = '';
    while (Date.now() < shownDeadline && !said.includes(waiting)) {
      said = (await runCli(['topology', 'migration', 'show', id], { env })).stdout;
      if (!said.includes(waiting)) await sleep(300);
    }
    expect(said).toContain(waiting);
    const b = await startHostWorker(cleanups, env, 'b');
    const deadline = Date.now() + 90_000;
    let lifecycle = '';
    while (Date.now() < deadline) {
      const shown = await runCli(['topology', 'migration', 'show', id, '--json'], { env });
      lifecycle = (JSON.parse(shown.stdout) as { state: { lifecycle: string } }).state.lifecycle;
      if (['completed', 'rolled_back', 'failed', 'cancelled'].includes(lifecycle)) break;
      await sleep(300);
    }
    expect(lifecycle).toBe('completed');
    expect(slotsIn(b.stateDir, environment).length).toBeGreaterThan(0);
    expect(await (await fetch(w.url)).json()).toMatchObject({ version: '1.0.0' });
    const down = await cli(['topology', 'down', '--yes']);
    expect(down.code, `${down.stdout}${down.stderr}`).toBe(0);
  }, 150_000);

  it("a host's worker killed mid-gate: the call waits for that host, show says so, and it completes on that host once its worker is back", async ({
    expect,
    onTestFinished,
  }) => {
    const { cleanups } = testScope(onTestFinished);
    const environment = `killed-${process.pid}-${Date.now().toString(36)}`;
    const w = await workspace('test/fixtures/gated', (y) =>
      y
        .replace('name: gated', `name: ${environment}`)
        .replace(
          'infra: { type: exec, dir: ./infra, timeout: 30s }',
          'infra: { type: exec, dir: ./infra, timeout: 30s, runsOn: b }\n  edge: { type: router, runsOn: a }',
        )
        .replace('to: api }', 'to: api, driver: edge }')
        .replace('deadline: 60s', 'deadline: 300s'),
    );
    cleanups.push(w.cleanup);
    const env = { WORKFLOW_HOST: temporalAddress(), TEMPORAL_TASK_QUEUE: uniqueTaskQueue('killed') };
    const a = await startHostWorker(cleanups, env, 'a');
    const b = await startHostWorker(cleanups, env, 'b');
    const cli = (args: string[]) => runCli([...args, '-f', w.file], { env });
    const show = async (id: string) =>
      JSON.parse((await runCli(['topology', 'migration', 'show', id, '--json'], { env })).stdout) as {
        summary: { status: string; lifecycle: string; actionsDone: number };
      };
    const until = async (
      id: string,
      ok: (s: { status: string; lifecycle: string; actionsDone: number }) => boolean,
      ms: number,
    ) => {
      const deadline = Date.now() + ms;
      let last = '';
      while (Date.now() < deadline) {
        const { summary } = await show(id);
        last = `${summary.lifecycle}: ${summary.status}`;
        if (ok(summary)) return summary;
        await sleep(500);
      }
      throw new Error(`${id} did not get there within ${ms} ms; last: ${last}`);
    };

    const started = await cli(['topology', 'migrate', '--yes', '--detach']);
    expect(started.code, started.stderr).toBe(0);
    const id = /mig_[0-9a-z]+/.exec(started.stdout)?.[0] as string;
    // The gate is held (no release-gate in b's state directory): its call runs on b.
    await until(id, (s) => s.status.includes('health_gate') && s.actionsDone >= 2, 30_000);
    await b.kill();
    // Worker a polls the shared queue all along; the gate's next attempt waits in host b's queue.
    // Temporal lists a killed poller for a minute or more, but the attempt scheduled there and not
    // taken says it within seconds (the heartbeat timeout, the retry's backoff, 5 s unstarted).
    const waiting = await until(
      id,
      (s) => s.status.includes('waiting for a worker on host b (none polling since'),
      40_000,
    );
    expect(waiting.lifecycle).toBe('running');
    // As show says so, the call has not been run again: not on a, which polls the shared queue.
    const before = await cli(['topology', 'migration', 'logs', id]);
    expect(before.stdout).not.toMatch(/check_health is run again/);
    expect(existsSync(path.join(a.stateDir, 'slots'))).toBe(false);
    const back = await startHostWorker(cleanups, env, 'b', b);
    // The gate's check runs on b; the shift after it watches green from the route's host, a (a
    // command probe runs there: see the limits in docs/temporal.md).
    writeFileSync(path.join(back.stateDir, 'release-gate'), '');
    mkdirSync(a.stateDir, { recursive: true });
    writeFileSync(path.join(a.stateDir, 'release-gate'), '');
    // Until it has ended: `committing` (the point of no return passed, green's promotion under way)
    // is neither running nor the end.
    const ended = await until(
      id,
      (s) => ['completed', 'rolled_back', 'failed', 'cancelled'].includes(s.lifecycle),
      60_000,
    );
    const log = await cli(['topology', 'migration', 'logs', id]);
    expect(ended.lifecycle, log.stdout).toBe('completed');
    expect(log.stdout).toMatch(/check_health is run again \(attempt 2\)/);
    // Nothing of the component ran on a.
    expect(existsSync(path.join(a.stateDir, 'slots'))).toBe(false);
    expect(readdirSync(path.join(back.stateDir, 'slots')).length).toBe(2);
    const down = await cli(['topology', 'down', '--yes']);
    expect(down.code, `${down.stdout}${down.stderr}`).toBe(0);
  }, 150_000);
});
