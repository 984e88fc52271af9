/**
 * `cutover worker` (and the worker inside `cutover server` in Temporal mode): runs cutover's
 * workflows and activities from the task queue. The workflow code is bundled at build time
 * (dist/engine/temporal/workflow-bundle.js), so a worker starts in about a second.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { IllegalStateError } from '@temporalio/common';
import {
  DefaultLogger,
  type LogLevel,
  type LogMetadata,
  NativeConnection,
  Runtime,
  Worker,
} from '@temporalio/worker';
import { defaultHost } from '../../core/topology/hosts.js';
import { superviseRouter } from '../drivers/router-driver.js';
import type { DriverSet } from '../runner/execute-command.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import type { StateDir } from '../store/state-dir.js';
import { createActivities } from './activities.js';
import {
  connectionOptions,
  connectTimeoutMs,
  isNamespaceNotFound,
  noNamespace,
  probe,
  type TemporalSettings,
  unreachable,
  withDeadline,
} from './connection.js';
import { dataConverter } from './payload-codec.js';
import { requireSearchAttributes } from './search-attributes.js';
import { hostQueue } from './workflow-definitions.js';

export interface WorkerOptions {
  settings: TemporalSettings;
  /**
   * The host this worker is (`--host`; default `local`): beside the shared task queue it polls the
   * host's own (hostQueue), where the calls that touch this machine are scheduled.
   */
  host?: string;
  /** Where the drivers keep their local records on this machine. */
  stateDir: StateDir;
  drivers: DriverSet;
  /** The worker's secrets (decided where it starts: its environment, its secrets file). */
  secrets: ProcessSecrets;
  /** At most this many driver calls at once (default 100). */
  maxConcurrentActivities?: number;
  /** A line for the worker's output (the router's supervision says when it restarts one). */
  log?: (line: string) => void;
}

export interface RunningWorker {
  /** Resolves when the worker has stopped; rejects if it failed. */
  done: Promise<void>;
  /** Stops polling, lets activities in flight finish (bounded), then closes. */
  shutdown(): Promise<void>;
}

export function workflowBundlePath(): string {
  return fileURLToPath(new URL('./workflow-bundle.js', import.meta.url));
}

/**
 * The SDK's runtime is the process's own: the first worker installs it, with its logger (the SDK's
 * own logging is chatty; warnings and errors are enough next to cutover's lines), and a later
 * worker in the same process finds it installed (the SDK says so with an IllegalStateError, and
 * keeps these options if it makes the runtime again after a shutdown).
 */
function installRuntime(logger: DefaultLogger): void {
  try {
    Runtime.install({ logger });
  } catch (error) {
    if (!(error instanceof IllegalStateError)) throw error;
  }
}

/**
 * The SDK's logger at WARN, but for the warning that a worker has no workflows: a host's own queue
 * is polled by a worker of activities only (command-host.ts), by design, and the SDK would say so
 * at every start of `cutover worker --host`.
 */
class WorkerLogger extends DefaultLogger {
  override log(level: LogLevel, message: string, meta?: LogMetadata): void {
    if (message.startsWith('No workflows registered')) return;
    super.log(level, message, meta);
  }
}

export async function startWorker(options: WorkerOptions): Promise<RunningWorker> {
  installRuntime(new WorkerLogger('WARN'));
  const { settings } = options;
  let connection: NativeConnection;
  try {
    await probe(settings);
    connection = await withDeadline(NativeConnection.connect(connectionOptions(settings)), connectTimeoutMs);
  } catch (error) {
    throw unreachable(settings, error);
  }
  let workers: Worker[];
  try {
    // Checked first: a Worker.create that fails on a missing namespace leaves its workflow threads
    // behind, and they keep the process alive after the error is reported.
    await withDeadline(
      connection.workflowService.describeNamespace({ namespace: settings.namespace }),
      connectTimeoutMs,
    ).catch((error: unknown) => {
      throw unreachable(settings, error);
    });
    // Every migration it would run sets them: a namespace without them is said at once, not by
    // each start refused later.
    await requireSearchAttributes(connection.operatorService, settings);
    workers = await createWorkers(connection, options);
  } catch (error) {
    // An open connection would keep the process alive after the error is reported.
    await connection.close().catch(() => undefined);
    if (isNamespaceNotFound(error)) throw noNamespace(settings);
    throw error;
  }
  // The routers this worker's migrations started are kept running while it runs: one killed in a
  // hold is started again at once, not at the next route step.
  const supervision = new AbortController();
  void superviseRouter(options.stateDir, { signal: supervision.signal, log: options.log ?? (() => {}) });
  const shutdown = () => {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
  };
  // One of the two failing stops the other: the process runs both or neither.
  const done = Promise.all(
    workers.map((w) =>
      w.run().catch((error: unknown) => {
        shutdown();
        throw error;
      }),
    ),
  )
    .then(() => undefined)
    .finally(() => {
      supervision.abort();
      return connection.close();
    });
  return {
    done,
    async shutdown() {
      shutdown();
      await done;
    },
  };
}

/**
 * Two workers on one connection: the workflows and every call placed nowhere on the shared queue,
 * and this host's calls on its own queue (activities only), with one set of activities (one state
 * directory, one router).
 */
async function createWorkers(connection: NativeConnection, options: WorkerOptions): Promise<Worker[]> {
  const { settings } = options;
  const bundle = workflowBundlePath();
  const activities = createActivities({
    stateDir: options.stateDir,
    drivers: options.drivers,
    secrets: options.secrets,
  });
  const common = {
    connection,
    namespace: settings.namespace,
    dataConverter,
    activities,
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivities ?? 100,
    shutdownGraceTime: '10s',
    // A pause, rollback or cancel reaches a driver call (a health gate) with the next heartbeat's
    // answer; the SDK sends them at most every 4 s (80% of the heartbeat timeout), which made a
    // pause take up to 4 s to stop a gate. Sent every second, it stops within about one.
    maxHeartbeatThrottleInterval: '1s',
  } as const;
  const shared = await Worker.create({
    ...common,
    taskQueue: settings.taskQueue,
    ...(existsSync(bundle)
      ? { workflowBundle: { codePath: bundle } }
      : { workflowsPath: fileURLToPath(new URL('./workflows.js', import.meta.url)) }),
    // A workflow's next task goes to the queue of the worker that has it cached; when that worker
    // died (SIGKILL, a lost machine), the task waits this long before any worker may take it. The
    // SDK's 10 s came on top of the 5 s heartbeat timeout at every failover; a live worker takes
    // its sticky tasks within milliseconds, so 2 s costs nothing otherwise.
    stickyQueueScheduleToStartTimeout: '2s',
  });
  const own = await Worker.create({
    ...common,
    taskQueue: hostQueue(settings.taskQueue, options.host ?? defaultHost),
  });
  return [shared, own];
}
