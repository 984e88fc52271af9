/**
 * A host whose worker is gone for longer than the migration waits for it (issue 30,
 * `strategy.hostWait`): the call placed there fails with the host named, the migration rolls back,
 * and the undo on that host runs once a worker of the host is back. Two `cutover worker --host`
 * processes with state directories of their own, on the run's real dev server; the exec driver of
 * test/fixtures/gated holds the health gate on host b until the test releases it.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { workspace } from '../support/migrations.js';
import {
  startWorkerProcess,
  temporalAddress,
  uniqueTaskQueue,
  type WorkerProcess,
} from '../support/temporal-worker.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
}, 60_000);

interface Shown {
  summary: { status: string; lifecycle: string; actionsDone: number };
}

describe('strategy.hostWait', () => {
  it("a host's worker gone longer than hostWait: the call fails naming the host, the migration is undone once the host is back", async () => {
    const environment = `hostwait-${process.pid}-${Date.now().toString(36)}`;
    const w = await workspace('test/fixtures/gated', (y) =>
      y
        .replace('name: gated', `name: ${environment}`)
        .replace(
          'infra: { type: exec, dir: ./infra, timeout: 30s }',
          'infra: { type: exec, dir: ./infra, timeout: 30s, runsOn: b }\n  edge: { type: router, runsOn: a }',
        )
        .replace('to: api }', 'to: api, driver: edge }')
        .replace('commit: auto', 'commit: auto\n  hostWait: 8s')
        .replace('interval: 200ms', 'interval: 1s')
        .replace('deadline: 60s', 'deadline: 300s'),
    );
    cleanups.push(w.cleanup);
    const taskQueue = uniqueTaskQueue('hostwait');
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
    const show = async (id: string) =>
      (JSON.parse((await runCli(['topology', 'migration', 'show', id, '--json'], { env })).stdout) as Shown)
        .summary;
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
    // The first layout, its gate let through on b; the next one's is held there.
    const gate = path.join(b.stateDir, 'release-gate');
    mkdirSync(b.stateDir, { recursive: true });
    writeFileSync(gate, '');
    const first = await cli(['topology', 'migrate', '--yes']);
    expect(first.code, `${first.stdout}${first.stderr}`).toBe(0);
    rmSync(gate);
    writeFileSync(w.file, readFileSync(w.file, 'utf8').replaceAll('version: "1"', 'version: "2"'));

    const started = await cli(['topology', 'migrate', '--yes', '--detach']);
    expect(started.code, started.stderr).toBe(0);
    const id = /mig_[0-9a-z]+/.exec(started.stdout)?.[0] as string;
    // The gate is held on b (no release-gate in b's state directory); then b is lost.
    await until(id, (s) => s.status.includes('health_gate') && s.actionsDone >= 2, 30_000);
    await b.kill();
    await until(id, (s) => s.status.includes('waiting for a worker on host b'), 40_000);
    // Past hostWait (8 s) the gate's call fails, naming the host, and the migration rolls back;
    // its undo on b (retiring green) waits for a worker of b in turn.
    const deadline = Date.now() + 60_000;
    let logs = '';
    while (Date.now() < deadline && !logs.includes('no worker on host b took check_health within 8s')) {
      logs = (await cli(['topology', 'migration', 'logs', id])).stdout;
      await sleep(500);
    }
    expect(logs).toContain(
      'no worker on host b took check_health within 8s: is `cutover worker --host b` running with this TEMPORAL_TASK_QUEUE?',
    );
    const back = await worker('b', b.stateDir);
    const ended = await until(id, (s) => !['running', 'rolling_back'].includes(s.lifecycle), 60_000);
    const after = (await cli(['topology', 'migration', 'logs', id])).stdout;
    // Undone as any failed gate is (the engine's `failed`, blue serving), with the host as reason.
    expect(ended.lifecycle, after).toBe('failed');
    expect(after).toContain(
      'failed: blue is serving (health gate failed for api: no worker on host b took check_health within 8s',
    );
    // Not tried again: the step failed at once, and green was retired on b once b's worker was back.
    expect(after).not.toMatch(/within 8s[^\n]*retry 2/);
    expect(after).toMatch(/undo: retire green api done/);
    const down = await cli(['topology', 'down', '--yes']);
    expect(down.code, `${down.stdout}${down.stderr}`).toBe(0);
    expect(back.running()).toBe(true);
  }, 180_000);
});
