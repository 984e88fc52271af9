/**
 * Vitest global setup: one Temporal dev server for the whole run (the Temporal tests `inject` its
 * address), and one worker host beside it (test/support/temporal-worker-host.ts). Without the `temporal` binary the run goes on, and every Temporal test fails saying how
 * to install it; it never skips.
 */
import type { TestProject } from 'vitest/node';
import { type DevServer, installHint, startDevServer, temporalBinary } from './temporal.js';
import { startWorkerHost, type WorkerHost } from './temporal-worker-host.js';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string | null;
    temporalProblem: string | null;
    /** The run's worker host (test/support/temporal-worker-host.ts), or null. */
    temporalWorkerHost: string | null;
    temporalWorkerHostProblem: string | null;
  }
}

let server: DevServer | null = null;
let host: WorkerHost | null = null;

export async function setup(project: TestProject): Promise<void> {
  project.provide('temporalWorkerHost', null);
  project.provide('temporalWorkerHostProblem', 'no Temporal dev server');
  if (!temporalBinary()) {
    project.provide('temporalAddress', null);
    project.provide('temporalProblem', installHint);
    return;
  }
  try {
    // Not marked as the run's (test/support/leftover-processes.ts): it lives until this teardown.
    const { CUTOVER_TEST_RUN: _mark, ...env } = process.env;
    server = await startDevServer({ env });
    project.provide('temporalAddress', server.address);
    project.provide('temporalProblem', null);
  } catch (error) {
    project.provide('temporalAddress', null);
    project.provide('temporalProblem', (error as Error).message);
  }
  if (!server) return;
  try {
    host = await startWorkerHost(process.env);
    project.provide('temporalWorkerHost', host.url);
    project.provide('temporalWorkerHostProblem', null);
  } catch (error) {
    project.provide('temporalWorkerHostProblem', (error as Error).message);
  }
}

export async function teardown(): Promise<void> {
  await host?.stop();
  await server?.stop();
}
