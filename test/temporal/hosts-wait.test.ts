/**
 * A host whose worker is gone for longer than the migration waits for it (issue 30,
 * `strategy.hostWait`): the call placed there fails with the host named, the migration rolls back,
 * and the undo on that host runs once a worker of the host is back. Two `cutover worker --host`
 * processes with state directories of their own, on the run's real dev server; the exec driver of
 * test/fixtures/gated holds the health gate on host b until the test releases it.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { finalLifecycles, type Lifecycle } from '../../core/migration/types.js';
import { runCli } from '../support/cli.js';
import { workspace } from '../support/migrations.js';
import {
  startWorkerProcess,
  temporalAddress,
  uniqueTaskQueue,
  type WorkerProcess,
} from '../support/temporal-worker.js';

interface Shown {
  summary: { status: string; lifecycle: string; actionsDone: number };
}

/**
 * test/fixtures/gated with its exec driver on host b and its router on host a, `edit` applied; a
 * worker of each host, with a state directory of its own; the CLI and `migration show` to them.
 */
async function placedGated(
  onTestFinished: (fn: () => Promise<void>) => void,
  prefix: string,
  edit: (yaml: string) => string = (y) => y,
) {
  // This test's own cleanups (the cases run at once: a file-wide list would take another's down).
  const cleanups: (() => Promise<unknown>)[] = [];
  onTestFinished(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });
  const environment = `${prefix}-${process.pid}-${Date.now().toString(36)}`;
  const w = await workspace('test/fixtures/gated', (y) =>
    edit(
      y
        .replace('name: gated', `name: ${environment}`)
        .replace(
          'infra: { type: exec, dir: ./infra, timeout: 30s }',
          'infra: { type: exec, dir: ./infra, timeout: 30s, runsOn: b }\n  edge: { type: router, runsOn: a }',
        )
        .replace('to: api }', 'to: api, driver: edge }')
        .replace('interval: 200ms', 'interval: 1s')
        .replace('deadline: 60s', 'deadline: 300s'),
    ),
  );
  cleanups.push(w.cleanup);
  const taskQueue = uniqueTaskQueue(prefix);
  const env = { WORKFLOW_HOST: temporalAddress(), TEMPORAL_TASK_QUEUE: taskQueue };
  const worker = async (host: string, stateDir?: string): Promise<WorkerProcess> => {
    const started = await startWorkerProcess({
      address: env.WORKFLOW_HOST,
      taskQueue,
      ...(stateDir ? { stateDir } : {}),
      host,
    });
    cleanups.push(started.stop);
    return started;
  };
  const a = await worker('a');
  const b = await worker('b');
  const cli = (args: string[]) => runCli([...args, '-f', w.file], { env });
  // A look that fails (the CLI's own error) reads as a status of that error, and the wait goes on.
  const show = async (id: string): Promise<Shown['summary']> => {
    const shown = await runCli(['topology', 'migration', 'show', id, '--json'], { env });
    const summary = shown.code === 0 ? (JSON.parse(shown.stdout) as Partial<Shown>).summary : undefined;
    return (
      summary ?? {
        status: `show exited ${shown.code}: ${shown.stderr.trim()}`,
        lifecycle: 'unknown',
        actionsDone: 0,
      }
    );
  };
  const until = async (id: string, ok: (s: Shown['summary']) => boolean, ms: number) => {
    const deadline = Date.now() + ms;
    let last = '';
    while (Date.now() < deadline) {
      const summary = await show(id);
      last = `${summary.lifecycle}: ${summary.status}`;
      if (ok(summary)) return summary;
      await sleep(300);
    }
    throw new Error(`${id} did not get there within ${ms} ms; last: ${last}`);
  };
  // The router's host may watch green too (a command probe): it passes there at once.
  mkdirSync(a.stateDir, { recursive: true });
  writeFileSync(path.join(a.stateDir, 'release-gate'), '');
  // The first layout, its gate let through on b.
  const gate = path.join(b.stateDir, 'release-gate');
  mkdirSync(b.stateDir, { recursive: true });
  writeFileSync(gate, '');
  const first = await cli(['topology', 'migrate', '--yes']);
  expect(first.code, `${first.stdout}${first.stderr}`).toBe(0);
  return { w, a, b, gate, worker, cli, until };
}

describe.concurrent('a host whose worker is gone', () => {
  it('gone longer than strategy.hostWait: the call fails naming the host, the migration is undone once the host is back', async ({
    onTestFinished,
  }) => {
    const { w, b, gate, worker, cli, until } = await placedGated(onTestFinished, 'hostwait', (y) =>
      y.replace('commit: auto', 'commit: auto\n  hostWait: 8s'),
    );
    // The next layout's gate is held on b.
    rmSync(gate);
    writeFileSync(w.file, readFileSync(w.file, 'utf8').replaceAll('version: "1"', 'version: "2"'));

    const started = await cli(['topology', 'migrate', '--yes', '--detach']);
    expect(started.code, started.stderr).toBe(0);
    const id = /mig_[0-9a-z]+/.exec(started.stdout)?.[0] as string;
    // The gate is held on b (no release-gate in b's state directory); then b is lost.
    await until(id, (s) => s.status.includes('health_gate') && s.actionsDone >= 2, 30_000);
    await b.kill();
    await until(id, (s) => s.status.includes('waiting for a worker on host b'), 40_000);
    // Past hostWait (8 s) the gate's call fails, naming the host, and the migration is undone;
    // its undo on b (retiring green) waits for a worker of b as long as the call may run.
    await until(
      id,
      (s) => s.lifecycle !== 'running' || s.status.includes('no worker on host b took'),
      60_000,
    );
    const back = await worker('b', b.stateDir);
    const ended = await until(id, (s) => finalLifecycles.includes(s.lifecycle as Lifecycle), 90_000);
    const after = (await cli(['topology', 'migration', 'logs', id])).stdout;
    // Undone as any failed gate is (the engine's `failed`, blue serving), with the host as reason.
    expect(ended.lifecycle, after).toBe('failed');
    // (db's gate, on b too, may be the one in flight when b is lost: it has no check, so it is quick.)
    expect(after).toMatch(
      /failed: blue is serving \(health gate failed for (api|db): no worker on host b took check_health within 8s/,
    );
    // Not tried again: the step failed at once, and green was retired on b once b's worker was back.
    expect(after).not.toMatch(/within 8s[^\n]*retry 2/);
    expect(after).toMatch(/undo: retire green api done/);
    const down = await cli(['topology', 'down', '--yes']);
    expect(down.code, `${down.stdout}${down.stderr}`).toBe(0);
    expect(back.running()).toBe(true);
  }, 180_000);

  it('killed during a provision on its host: the migration waits, says so, and completes on that host once its worker is back', async ({
    onTestFinished,
  }) => {
    const { w, b, worker, cli, until } = await placedGated(onTestFinished, 'provkill');
    // The next provision of api holds (its script waits for release-provision) and says it started.
    const provision = path.join(path.dirname(w.file), 'infra', 'provision');
    writeFileSync(
      provision,
      readFileSync(provision, 'utf8').replace(
        'set -eu\n',
        'set -eu\nif [ "$CUTOVER_COMPONENT" = api ] && [ "$CUTOVER_VERSION" = 2 ]; then\n  touch "$CUTOVER_STATE_DIR/provisioning"\n  n=0; until [ -e "$CUTOVER_STATE_DIR/release-provision" ] || [ $n -ge 600 ]; do sleep 0.1; n=$((n+1)); done\nfi\n',
      ),
    );
    writeFileSync(w.file, readFileSync(w.file, 'utf8').replaceAll('version: "1"', 'version: "2"'));
    const started = await cli(['topology', 'migrate', '--yes', '--detach']);
    expect(started.code, started.stderr).toBe(0);
    const id = /mig_[0-9a-z]+/.exec(started.stdout)?.[0] as string;
    const marker = path.join(b.stateDir, 'provisioning');
    const deadline = Date.now() + 30_000;
    while (!existsSync(marker) && Date.now() < deadline) await sleep(100);
    expect(existsSync(marker), 'the provision of api never started on b').toBe(true);
    await b.kill();
    const waiting = await until(id, (s) => s.status.includes('waiting for a worker on host b'), 40_000);
    expect(waiting.lifecycle).toBe('running');
    writeFileSync(path.join(b.stateDir, 'release-provision'), '');
    await worker('b', b.stateDir);
    const ended = await until(id, (s) => finalLifecycles.includes(s.lifecycle as Lifecycle), 90_000);
    const logs = (await cli(['topology', 'migration', 'logs', id])).stdout;
    expect(ended.lifecycle, logs).toBe('completed');
    expect(logs).toMatch(/provision is run again \(attempt 2\): the worker that ran it stopped answering/);
    const down = await cli(['topology', 'down', '--yes']);
    expect(down.code, `${down.stdout}${down.stderr}`).toBe(0);
  }, 180_000);
});
