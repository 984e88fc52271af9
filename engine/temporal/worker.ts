/**
 * `cutover worker` (and the worker inside `cutover server` in Temporal mode): runs cutover's
 * workflows and activities from the task queue. The workflow code is bundled at build time
 * (dist/engine/temporal/workflow-bundle.js), so a worker starts in about a second.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { NativeConnection, Runtime, Worker } from '@temporalio/worker';
import type { DriverSet } from '../runner/execute-command.js';
import { createActivities } from './activities.js';
import { connectTimeoutMs, type TemporalSettings, unreachable, withDeadline } from './connection.js';

export interface WorkerOptions {
  settings: TemporalSettings;
  /** Where the drivers keep their local records on this machine. */
  stateDir: string;
  drivers: DriverSet;
  /** At most this many driver calls at once (default 100). */
  maxConcurrentActivities?: number;
}

export interface RunningWorker {
  /** Resolves when the worker has stopped; rejects if it failed. */
  done: Promise<void>;
  /** Stops polling, lets activities in flight finish (bounded), then closes. */
  shutdown(): Promise<void>;
}

let runtimeInstalled = false;

export function workflowBundlePath(): string {
  return fileURLToPath(new URL('./workflow-bundle.js', import.meta.url));
}

export async function startWorker(options: WorkerOptions): Promise<RunningWorker> {
  if (!runtimeInstalled) {
    // The SDK's own logging is chatty; warnings and errors are enough next to cutover's lines.
    Runtime.install({ logger: new (await import('@temporalio/worker')).DefaultLogger('WARN') });
    runtimeInstalled = true;
  }
  const { settings } = options;
  let connection: NativeConnection;
  try {
    connection = await withDeadline(
      NativeConnection.connect({
        address: settings.address,
        ...(settings.tls ? { tls: settings.tls } : {}),
        ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
      }),
      connectTimeoutMs,
    );
  } catch (error) {
    throw unreachable(settings, error);
  }
  const bundle = workflowBundlePath();
  const worker = await Worker.create({
    connection,
    namespace: settings.namespace,
    taskQueue: settings.taskQueue,
    ...(existsSync(bundle)
      ? { workflowBundle: { codePath: bundle } }
      : { workflowsPath: fileURLToPath(new URL('./workflows.js', import.meta.url)) }),
    activities: createActivities({ stateDir: options.stateDir, drivers: options.drivers }),
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivities ?? 100,
    shutdownGraceTime: '10s',
  });
  const done = worker.run().finally(() => connection.close());
  return {
    done,
    async shutdown() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
}
