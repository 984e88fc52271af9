/**
 * What runs, in Temporal mode (issue 18, items 1 to 3 on WORKFLOW_HOST): the replicas and the router
 * live on the worker's machine, so the worker observes them (a short workflow on the task queue).
 * Every replica of a live component is killed behind cutover's back: `topology status` (run with
 * no state directory of the worker's) shows them not running, `plan --detailed-exitcode` exits 2
 * naming the drift (`--refresh=false` keeps the record-only plan), a plan pinned before the drift
 * is refused as stale, `migrate` repairs it, and, killed again, `cutover watch --self-heal`
 * repairs it without a person. The real CLI, a real `cutover worker`, real replicas and router.
 */
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EnvironmentStatus } from '../../core/environment-status.js';
import { runCli, tempDir } from '../support/cli.js';
import { CliProcess, cleanUp, git } from '../support/git.js';
import { killSlots, liveWorkspace, type Workspace } from '../support/migrations.js';
import { waitGone } from '../support/processes.js';
import { startWorker, type TestWorker } from '../support/temporal-worker.js';
import { sharedTemporal, uniqueName } from './robustness-helpers.js';

let ws: (Workspace & { url: string }) | undefined;
let worker: TestWorker | undefined;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await cleanUp();
  if (ws && worker) {
    await runCli(['topology', 'down', '-f', ws.file, '--yes'], { env: worker.env }).catch(() => undefined);
  }
  if (worker) {
    killSlots(worker.stateDir);
    await worker.stop();
  }
  await ws?.cleanup();
  for (const cleanup of cleanups.splice(0)) await cleanup();
  ws = undefined;
  worker = undefined;
});

/** Traffic moves at once and health passes after one probe: the test is about what happens after. */
const quick = (environment: string) => (yaml: string) =>
  yaml
    .replace('name: live-demo', `name: ${environment}`)
    .replace('shift: [10, 50, 100]', 'shift: [100]')
    .replace('successThreshold: 2', 'successThreshold: 1');

async function answer(url: string): Promise<number> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}

describe('observed state in Temporal mode', () => {
  it('status shows dead replicas, plan names the drift, migrate repairs it, and watch --self-heal does too', async () => {
    const environment = uniqueName('observe');
    ws = await liveWorkspace(quick(environment));
    const { dir: callerDir, cleanup } = await tempDir('cutover-caller-');
    cleanups.push(cleanup);
    worker = await startWorker({ address: sharedTemporal(), taskQueue: uniqueName('observe') });
    // The caller's own state directory is empty: whatever it shows was observed by the worker.
    const env = { ...worker.env, CUTOVER_STATE_DIR: path.join(callerDir, 'state') };
    const cli = (args: string[]) => runCli([...args, '-f', (ws as Workspace).file], { env });
    const status = async (): Promise<EnvironmentStatus> => {
      const result = await cli(['topology', 'status', '--json']);
      expect(result.code, result.stderr).toBe(0);
      return JSON.parse(result.stdout) as EnvironmentStatus;
    };
    const plan = (...extra: string[]) => cli(['topology', 'plan', '--detailed-exitcode', ...extra]);

    const migrated = await cli(['topology', 'migrate', '--yes']);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(await answer(ws.url)).toBe(200);
    const healthy = await status();
    expect(healthy.components[0]?.replicas.map((r) => r.state)).toEqual(['running', 'running']);
    expect(healthy.routes[0]?.state).toBe('served');
    expect(healthy.drift).toEqual([]);
    expect((await plan()).code).toBe(0);
    const pinned = JSON.parse((await cli(['topology', 'plan', '--json'])).stdout).planId as string;

    const killAll = async (pids: number[]) => {
      for (const pid of pids) process.kill(pid, 'SIGKILL');
      for (const pid of pids) await waitGone(pid);
    };
    const pids = healthy.components[0]?.replicas.map((r) => r.pid as number) ?? [];
    expect(pids).toHaveLength(2);
    await killAll(pids);
    expect(await answer(ws.url)).toBeGreaterThanOrEqual(500);

    const dead = await status();
    expect(dead.components[0]?.replicas.map((r) => r.state)).toEqual(['not_running', 'not_running']);
    expect(dead.drift).toEqual([{ kind: 'component', name: 'web', reason: '2 of 2 replicas not running' }]);
    const drifted = await plan();
    expect(drifted.code, drifted.stderr).toBe(2);
    expect(drifted.stdout).toContain('component web: 2 of 2 replicas not running');
    expect(drifted.stdout).toContain('-/+ component web will be replaced green-blue');
    const recordOnly = await plan('--refresh=false');
    expect(recordOnly.code, recordOnly.stderr).toBe(0);
    const stale = await cli(['topology', 'migrate', '--yes', '--plan-id', pinned]);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toContain('did not see what runs now (component web: 2 of 2 replicas not running)');

    const repaired = await cli(['topology', 'migrate', '--yes']);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    expect(await answer(ws.url)).toBe(200);
    const again = await status();
    expect(again.drift).toEqual([]);
    expect(again.serial).toBe(2);
    expect((await plan()).code).toBe(0);

    // Nobody at the keyboard: killed again, the watcher sees it through the worker and repairs it.
    const repo = path.dirname(path.dirname(ws.file));
    await git(repo, 'init', '-q', '-b', 'main');
    await git(repo, 'add', 'live-demo/topology.yaml', 'app');
    await git(repo, 'commit', '-q', '-m', 'live demo');
    await killAll(again.components[0]?.replicas.map((r) => r.pid as number) ?? []);
    const watch = new CliProcess(
      [
        'watch',
        '--repo',
        repo,
        '--out',
        path.join(callerDir, 'plans'),
        '--state-dir',
        path.join(callerDir, 'watch-state'),
        '--file',
        'live-demo/topology.yaml',
        '--self-heal',
        '--heal-interval',
        '300ms',
      ],
      { env },
    );
    const started = await watch.line(
      new RegExp(
        `self-heal: ${environment}: component web: 2 of 2 replicas not running; repairing with migration (mig_\\w+)`,
      ),
      { timeoutMs: 60_000 },
    );
    await watch.line(new RegExp(`self-heal: ${environment}: repaired by ${started.match[1]}`), {
      timeoutMs: 90_000,
    });
    expect(await answer(ws.url)).toBe(200);
    const healed = await status();
    expect(healed.drift).toEqual([]);
    expect(healed.serial).toBe(3);
    await watch.stop();
  }, 300_000);
});
