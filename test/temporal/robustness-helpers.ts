/**
 * Shared by the Temporal robustness tests: workers (in the run's worker host, or `cutover worker`
 * child processes for a test that kills one; every one stopped after the test), a task queue of each test's own (test files run side by side on the shared dev
 * server, and a worker must never pick up another test's driver calls: the exec scripts run with the
 * worker's state directory), and a client to poll migrations quickly.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, inject, type TestContext } from 'vitest';
import type { MigrationSummary } from '../../core/migration/summary.js';
import type { MigrationState } from '../../core/migration/types.js';
import { TemporalMigrations } from '../../engine/temporal/temporal-migrations.js';
import { runCli } from '../support/cli.js';
import {
  startWorker as startHosted,
  startWorkerProcess as startProcess,
  type TestWorker,
  type WorkerProcess,
} from '../support/temporal-worker.js';

/** The shared dev server's address; a missing one fails the test with the reason (never a skip). */
export function sharedTemporal(): string {
  const address = inject('temporalAddress');
  if (!address) throw new Error(`no Temporal dev server: ${inject('temporalProblem')}`);
  return address;
}

/** A name no other test (or earlier run against the same server) uses: environments, task queues. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 7)}`;
}

export interface TemporalTarget {
  address: string;
  taskQueue: string;
}

export function temporalEnv(t: TemporalTarget): NodeJS.ProcessEnv {
  return { WORKFLOW_HOST: t.address, TEMPORAL_TASK_QUEUE: t.taskQueue, TEMPORAL_NAMESPACE: 'default' };
}

/** Registry: the workers started and not yet stopped, stopped by `killWorkers()` (its users call it after each test or file). */
const workers = new Set<{ kill(): Promise<void> }>();

/**
 * `cutover worker --state-dir DIR` as a process of its own, ready once it says "cutover worker
 * on": for a test that kills it. Its `kill` (SIGKILL unless told) waits for the exit.
 */
export async function startWorkerProcess(t: TemporalTarget, stateDir: string): Promise<WorkerProcess> {
  const worker = await startProcess({ ...t, stateDir, env: { TEMPORAL_NAMESPACE: 'default' } });
  const entry = {
    kill: async () => {
      await worker.kill('SIGKILL');
      workers.delete(entry);
    },
  };
  workers.add(entry);
  void worker.exited.then(() => workers.delete(entry));
  return worker;
}

/** A worker on `stateDir` in the run's worker host (test/support/temporal-worker.ts `startWorker`). */
export async function startWorker(t: TemporalTarget, stateDir: string): Promise<TestWorker> {
  const worker = await startHosted({ ...t, stateDir });
  const entry = {
    kill: async () => {
      workers.delete(entry);
      await worker.stop();
    },
  };
  workers.add(entry);
  return worker;
}

/** Every worker a test started and did not stop (afterEach/afterAll). */
export async function killWorkers(): Promise<void> {
  await Promise.all([...workers].map((w) => w.kill()));
}

export function connectClient(t: TemporalTarget): Promise<TemporalMigrations> {
  return TemporalMigrations.connect({ address: t.address, namespace: 'default', taskQueue: t.taskQueue });
}

/** Polls the workflow's status query until the predicate holds (bounded); query errors are retried. */
export async function waitForState(
  client: TemporalMigrations,
  id: string,
  predicate: (state: MigrationState) => boolean,
  timeoutMs: number,
  pollMs = 150,
): Promise<MigrationState> {
  const deadline = Date.now() + timeoutMs;
  let last: MigrationState | undefined;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      last = (await client.show(id)).state;
      if (predicate(last)) return last;
    } catch (error) {
      lastError = error;
    }
    await sleep(pollMs);
  }
  throw new Error(
    `timed out after ${timeoutMs} ms; last state: ${last ? `${last.lifecycle} (inflight ${last.inflight[0]?.kind ?? 'none'})` : 'none'}${lastError ? `; last error: ${(lastError as Error).message}` : ''}`,
  );
}

export const isFinalState = (s: MigrationState) =>
  ['completed', 'rolled_back', 'cancelled', 'failed'].includes(s.lifecycle);

/** The health gate's driver call is running (for the component, when given). */
export const inGate = (component?: string) => (s: MigrationState) =>
  s.inflight[0]?.kind === 'check_health' &&
  (component === undefined || s.inflight[0].component === component);

/** `cutover topology migrate -f FILE --yes --detach` on Temporal: the migration id. */
export async function migrateDetached(t: TemporalTarget, file: string): Promise<string> {
  const result = await runCli(['topology', 'migrate', '-f', file, '--yes', '--detach'], {
    env: temporalEnv(t),
  });
  if (result.code !== 0) throw new Error(`migrate --detach failed (${result.code}): ${result.stderr}`);
  return result.stdout.trim();
}

/** `cutover topology migration show ID --json` on Temporal. */
export async function showJson(
  t: TemporalTarget,
  id: string,
): Promise<{ summary: MigrationSummary; state: MigrationState }> {
  const result = await runCli(['topology', 'migration', 'show', id, '--json'], { env: temporalEnv(t) });
  if (result.code !== 0) throw new Error(`migration show failed (${result.code}): ${result.stderr}`);
  return JSON.parse(result.stdout) as { summary: MigrationSummary; state: MigrationState };
}

/** The migration's log messages, through the CLI. */
export async function logText(t: TemporalTarget, id: string): Promise<string> {
  const result = await runCli(['topology', 'migration', 'logs', id], { env: temporalEnv(t) });
  if (result.code !== 0) throw new Error(`migration logs failed (${result.code}): ${result.stderr}`);
  return `${result.stdout}${result.stderr}`;
}

/**
 * What one test starts and must stop, for the tests of a `describe.concurrent` (each in a task
 * queue, environment and directory of its own): a list of its own, run newest first (errors
 * ignored) once the test has finished, and workers stopped through it, not through the file's
 * registry (`killWorkers` in another test's afterEach would stop this test's workers too).
 */
export interface TestScope {
  cleanups: (() => Promise<unknown>)[];
  /** `startWorker`, stopped when the test ends. */
  startWorker(t: TemporalTarget, stateDir: string): Promise<TestWorker>;
  /** `startWorkerProcess`, SIGKILLed when the test ends. */
  startWorkerProcess(t: TemporalTarget, stateDir: string): Promise<WorkerProcess>;
}

export function testScope(onTestFinished: TestContext['onTestFinished']): TestScope {
  const cleanups: (() => Promise<unknown>)[] = [];
  onTestFinished(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  }, 60_000);
  return {
    cleanups,
    async startWorker(t, stateDir) {
      const worker = await startHosted({ ...t, stateDir });
      cleanups.push(() => worker.stop());
      return worker;
    },
    async startWorkerProcess(t, stateDir) {
      const worker = await startProcess({ ...t, stateDir, env: { TEMPORAL_NAMESPACE: 'default' } });
      cleanups.push(() => worker.kill('SIGKILL'));
      return worker;
    },
  };
}

/**
 * Cleanups to run after each test of the file (newest first, errors ignored), after every worker the
 * test started is killed. Call once at the top of a test file; push onto the list it returns.
 */
export function cleanupsAfterEach(also?: () => Promise<void>): (() => Promise<void>)[] {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await killWorkers();
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
    await also?.();
  });
  return cleanups;
}
