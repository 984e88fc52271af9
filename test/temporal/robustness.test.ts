/**
 * Temporal mode, robustness: a `cutover worker` killed with SIGKILL in the middle of a health gate.
 * The gate's driver call heartbeats; once the heartbeats stop, Temporal gives the call to another
 * worker (same state directory: the same machine coming back), and the migration completes. Through
 * the real router under fixed-rate load, not one request fails meanwhile: the router and the app
 * replicas are processes of their own and keep serving while no worker runs.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'vitest';
import type { TemporalMigrations } from '../../engine/temporal/temporal-migrations.js';
import { startTestLoad } from '../support/load.js';
import {
  killRunners,
  liveWorkspace,
  releaseGate,
  setFileVersion,
  slotDirs,
  type Workspace,
  workspace,
} from '../support/migrations.js';
import {
  connectClient,
  inGate,
  isFinalState,
  logText,
  migrateDetached,
  sharedTemporal,
  showJson,
  type TemporalTarget,
  type TestScope,
  testScope,
  uniqueName,
  waitForState,
} from './robustness-helpers.js';

/** Runners of a workspace killed by pid, then its directory removed (when the test ends). */
const track = (scope: TestScope, w: Workspace) =>
  scope.cleanups.push(async () => {
    killRunners(w.stateDir);
    await w.cleanup();
  });
const closing = (scope: TestScope, client: TemporalMigrations) => scope.cleanups.push(() => client.close());

async function target(): Promise<TemporalTarget> {
  return { address: sharedTemporal(), taskQueue: uniqueName('rb-kill') };
}

// The two cases at once, each on a task queue, environment and workspace of its own: each is
// mostly waits (a worker's start, the 5 s heartbeat timeout before the call is run again). The
// load of the second is sent from a process of its own (test/support/load.ts), so the first case's
// work in this process does not delay it.
describe.concurrent('Temporal mode: a worker killed during the health gate', () => {
  it('a new worker on the same state directory picks the migration up and completes it', async ({
    expect,
    onTestFinished,
  }) => {
    const scope = testScope(onTestFinished);
    const t = await target();
    const environment = uniqueName('rb-gated');
    const ws = await workspace('test/fixtures/gated', (y) =>
      y.replace('name: gated', `name: ${environment}`),
    );
    track(scope, ws);
    const client = await connectClient(t);
    closing(scope, client);

    const first = await scope.startWorkerProcess(t, ws.stateDir);
    const id = await migrateDetached(t, ws.file);
    await waitForState(client, id, inGate('api'), 20_000);
    // The gate is held (no release-gate file): the call is running on the first worker.
    await sleep(300);
    await first.kill('SIGKILL');

    await scope.startWorker(t, ws.stateDir);
    releaseGate(ws);
    await waitForState(client, id, isFinalState, 40_000);

    const shown = await showJson(t, id);
    expect(shown.summary.lifecycle).toBe('completed');
    expect(shown.summary.reason).toBeNull();
    // Both green slots were provisioned once (on the first worker) and are live now.
    expect(slotDirs(ws)).toEqual([`api-${id}`, `db-${id}`]);
    const log = await logText(t, id);
    expect(log).toMatch(/check_health is run again \(attempt 2\): the worker that ran it stopped answering/);
    expect(log).toContain('health: gate passed');
  }, 120_000);

  it('live demo under load through the router: the worker dies mid-gate, zero failed requests', async ({
    expect,
    onTestFinished,
  }) => {
    const scope = testScope(onTestFinished);
    const t = await target();
    const environment = uniqueName('rb-live');
    // The gate is a command held until the test releases it (v1 passes at once), so the worker can be
    // killed while it is certainly in the gate; green's replicas are real app processes.
    const lw = await liveWorkspace((y) =>
      y
        .replace('name: live-demo', `name: ${environment}`)
        .replace(
          '      http: { path: /healthz }\n',
          `      command: [sh, -c, 'test "$CUTOVER_VERSION" = 1.0.0 || test -e "$CUTOVER_STATE_DIR/release-gate"']\n`,
        )
        .replace('failureThreshold: 3', 'failureThreshold: 100')
        .replace('deadline: 15s', 'deadline: 60s'),
    );
    track(scope, lw);
    const client = await connectClient(t);
    closing(scope, client);

    const first = await scope.startWorkerProcess(t, lw.stateDir);
    const v1 = await migrateDetached(t, lw.file);
    expect((await waitForState(client, v1, isFinalState, 30_000)).lifecycle).toBe('completed');
    expect(((await (await fetch(lw.url)).json()) as { version: string }).version).toBe('1.0.0');

    setFileVersion(lw, '1.0.0', '2.0.0');
    const load = startTestLoad({ url: lw.url, rate: 150 });
    let stopped = false;
    try {
      await sleep(500);
      const v2 = await migrateDetached(t, lw.file);
      await waitForState(client, v2, inGate('web'), 20_000);
      await sleep(300);
      await first.kill('SIGKILL');
      // No worker at all for a moment: the router keeps serving blue.
      await sleep(1_000);
      await scope.startWorker(t, lw.stateDir);
      releaseGate(lw);
      await waitForState(client, v2, isFinalState, 45_000);
      await sleep(500);
      const run = await load.stop();
      stopped = true;

      expect((await showJson(t, v2)).summary.lifecycle).toBe('completed');
      expect(run.failed).toBe(0);
      expect(run.records.length).toBeGreaterThan(1_000);
      expect(run.records.at(-1)?.version).toBe('2.0.0');
      expect(run.records.some((r) => r.version === '1.0.0')).toBe(true);
      expect(await logText(t, v2)).toMatch(/check_health is run again \(attempt 2\)/);
    } finally {
      if (!stopped) await load.stop().catch(() => undefined);
    }
  }, 120_000);
});
