/**
 * Vitest global setup: one Temporal dev server for the whole run (the Temporal tests `inject` its
 * address). Without the `temporal` binary the run goes on, and every Temporal test fails saying how
 * to install it; it never skips.
 */
import type { TestProject } from 'vitest/node';
import { type DevServer, installHint, startDevServer, temporalBinary } from './temporal.js';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string | null;
    temporalProblem: string | null;
  }
}

let server: DevServer | null = null;

export async function setup(project: TestProject): Promise<void> {
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
}

export async function teardown(): Promise<void> {
  await server?.stop();
}
