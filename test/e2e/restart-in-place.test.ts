/**
 * Repair in place, end to end (issue 18, item 2): a background worker (the example app on ports
 * nothing routes to) and the web app behind the router both lose every replica behind cutover's
 * back. `plan` restarts the worker in place and replaces web green-blue; `migrate --yes` repairs
 * both; `status` then shows no drift. The real CLI (compiled dist/), real processes, the real
 * router, all on loopback.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { readCurrentLayout } from '../../engine/store/layout-store.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { runCli } from '../support/cli.js';
import { liveWorkspace, type Workspace } from '../support/migrations.js';
import { waitGone } from '../support/processes.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const ws of spaces.splice(0)) await ws.cleanup();
});

/** live-demo with a worker beside web: the same app, two replicas, no route, no dependents. */
const worker = `  worker:
    driver: apps
    version: "1.0.0"
    run: { command: [node, server.js], cwd: ../app }
    replicas: 2
    health:
      http: { path: /healthz }
      interval: 200ms
      successThreshold: 2
      deadline: 15s
routes:`;

interface Replica {
  pid: number;
  port: number;
}

async function replicas(w: Workspace, component: string): Promise<Replica[]> {
  const layout = await readCurrentLayout(StateDir.at(w.stateDir), 'live-demo');
  return (own(layout.slots, component)?.details?.replicas ?? []) as Replica[];
}

function own<T>(record: Record<string, T> | undefined, key: string): T | undefined {
  return record && Object.hasOwn(record, key) ? record[key] : undefined;
}

async function pidAt(port: number): Promise<number | null> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/`, { headers: { connection: 'close' } });
    return ((await response.json()) as { pid: number }).pid;
  } catch {
    return null; // nothing answers
  }
}

async function killAll(list: readonly Replica[]): Promise<void> {
  for (const r of list) process.kill(r.pid, 'SIGKILL');
  for (const r of list) await waitGone(r.pid);
}

describe('drift repaired in place where no traffic depends on it', () => {
  it('plan restarts the worker in place and replaces web green-blue; migrate repairs both; status shows no drift', async () => {
    const w = await liveWorkspace((y) =>
      y.replace('shift: [10, 50, 100]', 'shift: [100]').replace('routes:', worker),
    );
    spaces.push(w);
    const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    const workers = await replicas(w, 'worker');
    const webs = await replicas(w, 'web');
    expect(workers).toHaveLength(2);
    await killAll([...workers, ...webs]);

    const plan = await runCli(['topology', 'plan', '-f', w.file, '--detailed-exitcode']);
    expect(plan.code, plan.stderr).toBe(2);
    expect(plan.stdout).toContain('~ component worker will be restarted in place');
    expect(plan.stdout).toContain('restart 2 of 2 replicas in place (no traffic depends on worker)');
    expect(plan.stdout).toContain('-/+ component web will be replaced green-blue');
    const json = JSON.parse((await runCli(['topology', 'plan', '-f', w.file, '--json'])).stdout);
    expect(json.actions.filter((a: { component?: string }) => a.component === 'worker')).toEqual([
      {
        id: 'provision_green:restart:worker',
        stage: 'provision_green',
        type: 'restart',
        component: 'worker',
        reason: 'restart 2 of 2 replicas in place (no traffic depends on worker)',
        after: [],
      },
      expect.objectContaining({
        id: 'health_gate:worker',
        type: 'check_health',
        after: ['provision_green:restart:worker'],
      }),
    ]);

    const repaired = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    expect(repaired.stdout).toMatch(/: completed$/m);

    // The worker: the same ports (they were free), new processes, recorded in the layout.
    const restarted = await replicas(w, 'worker');
    expect(restarted.map((r) => r.port)).toEqual(workers.map((r) => r.port));
    for (const r of restarted) {
      expect(workers.map((old) => old.pid)).not.toContain(r.pid);
      expect(await pidAt(r.port)).toBe(r.pid);
    }
    // web: a new green slot behind the route.
    expect((await fetch(w.url, { headers: { connection: 'close' } })).status).toBe(200);

    const status = await runCli(['topology', 'status', '-f', w.file, '--json']);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).drift).toEqual([]);
    const again = await runCli(['topology', 'plan', '-f', w.file, '--detailed-exitcode']);
    expect(again.code, again.stdout).toBe(0);
  });
});
