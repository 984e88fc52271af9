import { randomBytes } from 'node:crypto';
import { defineConfig } from 'vitest/config';
import { projectFiles } from './test/support/projects.js';
import LongestFirst from './test/support/sequencer.js';

// Every process the run starts inherits this mark (vitest's workers, and through them every CLI,
// server, runner and replica a test starts): test/support/leftover-processes.ts finds the ones
// still alive when the run ends by it, and fails the run.
process.env.CUTOVER_TEST_RUN ??= `${process.pid}-${randomBytes(4).toString('hex')}`;

/** The settings every project shares. */
const shared = {
  testTimeout: 30_000,
  setupFiles: ['./test/support/test-file-mark.ts', './test/support/fast-check-setup.ts'],
};

/**
 * Files run at once, in every project. vitest's default on 2 cores is 1 (cores − 1): one file at a
 * time, while most files wait on the processes they start. 2 on 2 cores. 3 is faster (session 14:
 * vitest 501–541 s against ~650 s), but the run is then CPU-bound (78 % of both cores over the
 * whole run) and the tests whose load generator shares their process starve: session 14 traced and
 * fixed four such failures (ARCHITECTURE.md, "Tests"), and the last fresh-clone run at 3 still
 * failed container-zero-downtime (its generator 350 ms late, 256 requests in flight). Session 15
 * moved the load generators into processes of their own that send every request due
 * (test/support/load.ts): 3 again. Session 17 tried 4 (session 16's ci32: 8:13 against 9:27 at 3):
 * fresh-clone runs at 4 passed (ci44) but failed on timing (ci45: bench:quick's migration; ci46: two
 * stateful-kill cases, a migration that completed between the runner's SIGKILL and its resume),
 * and six fixes for flakes at 4 were needed before that; 3 until those cases hold at 4.
 * CUTOVER_TEST_WORKERS overrides it.
 */
const workers = Number(process.env.CUTOVER_TEST_WORKERS ?? 3);

export default defineConfig({
  test: {
    maxWorkers: workers,
    // The projects and what goes in each: test/support/projects.ts (ARCHITECTURE.md, "Tests").
    // `npx vitest run --project unit` runs one.
    projects: [
      {
        test: {
          ...shared,
          name: 'unit',
          ...projectFiles.unit,
          pool: 'threads',
          // A worker thread imports the core once for all the files it runs, not once per file:
          // the project's CPU halves (78 → 41 CPU-seconds for its 58 files, measured side by side
          // on a loaded machine). Safe here: the core keeps no module state, and the setup files
          // (idempotent) still run before each file.
          isolate: false,
          setupFiles: [...shared.setupFiles, './test/support/no-process-setup.ts'],
        },
      },
      {
        test: {
          ...shared,
          name: 'integration',
          ...projectFiles.integration,
          pool: 'forks',
          // A fork imports the engine, the CLI and the helpers once for all the files it runs, not
          // once per file (a sample of 20 files, side by side, 5 rounds at load 10–30: median
          // 76.6 → 69.4 CPU-seconds, 118 → 97 s wall; vitest's transform + import 19 → 8 s). Safe: the source
          // and the test helpers keep no module state (test/module-state.test.ts), and a file that
          // leaves its process changed (environment, cwd, umask, listeners…) fails, named, and
          // the process is put back (the setup file below runs before each file).
          isolate: false,
          setupFiles: [...shared.setupFiles, './test/support/process-state-setup.ts'],
        },
      },
      {
        test: {
          ...shared,
          // Integration tests that replace a module (vi.mock): each file in a fresh fork.
          name: 'isolated',
          ...projectFiles.isolated,
          pool: 'forks',
          setupFiles: [...shared.setupFiles, './test/support/process-state-setup.ts'],
        },
      },
      {
        test: {
          ...shared,
          name: 'temporal',
          ...projectFiles.temporal,
          pool: 'forks',
          // As the integration project: a fork imports the engine, the Temporal client and the
          // helpers once for all the files it runs, and a file that leaves its process changed fails.
          isolate: false,
          setupFiles: [...shared.setupFiles, './test/support/process-state-setup.ts'],
          // One Temporal dev server per run, started only when this project runs.
          globalSetup: ['./test/support/temporal-global-setup.ts'],
          // Tests of a `describe.concurrent` run at once, at most this many: the Temporal tests'
          // cases are mostly waits (a worker's start, the 5 s heartbeat timeout, a hold's bound),
          // and a file runs its independent ones side by side, each in a space of its own
          // (test/temporal/stateful-switch-support.ts). 3, as the files at once: on 2 cores, with
          // two other files running, more would load the machine, not shorten the waits.
          maxConcurrency: 3,
        },
      },
      {
        test: {
          ...shared,
          name: 'infra',
          ...projectFiles.infra,
          pool: 'forks',
          // As the integration project: a fork imports the engine and the helpers once for all
          // the files it runs, and a file that leaves its process changed fails.
          isolate: false,
          setupFiles: [...shared.setupFiles, './test/support/process-state-setup.ts'],
          // The Podman images, built once per run.
          globalSetup: ['./test/support/podman-global-setup.ts'],
        },
      },
    ],
    // The longest files first, whatever their project: a long file started late is the run's tail.
    sequence: { sequencer: LongestFirst },
    // Fails the run when a process it started is still alive at its end.
    globalSetup: ['./test/support/leftover-processes.ts'],
    // A plain closing line ("N passed, N failed") that any CI log reader understands, after the
    // 25 slowest files.
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
