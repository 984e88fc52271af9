/**
 * Which vitest project runs which test file (vitest.config.ts), as globs relative to the
 * repository. test/test-layout.test.ts fails when a test file is in no project or in two, so a
 * new file is placed on purpose:
 *
 * - `unit`: the pure core, the views, the property tests and anything else that starts no process
 *   (worker threads; test/support/no-process-setup.ts makes starting one fail there).
 * - `integration`: tests that start processes (the CLI, a cutover server, runners, replicas, git)
 *   or a router (forks, one process for many files: test/support/process-state-setup.ts fails a
 *   file that leaves its process changed).
 * - `isolated`: integration tests that replace a module (`vi.mock`): forks, each file with modules
 *   of its own, since in a shared process the replacement would miss modules an earlier file
 *   loaded, or reach the next file's (test/test-layout.test.ts keeps such files here).
 * - `temporal`: tests that need the Temporal dev server; it is started (once) only when this
 *   project runs (test/support/temporal-global-setup.ts).
 * - `infra`: tests of the real Podman, nginx, haproxy, Caddy, Prometheus, PostgreSQL and redis-server; the Podman images are built once per
 *   run (test/support/podman-global-setup.ts).
 *
 * A project is its `include` less its `exclude`.
 */
export interface ProjectFiles {
  include: string[];
  exclude: string[];
}

/** The Temporal tests that need no dev server: pure functions of the engine's Temporal side. */
const pureTemporal = [
  'test/temporal/activity-timeouts.test.ts',
  'test/temporal/host-wait.test.ts',
  'test/temporal/keep-earlier.test.ts',
  'test/temporal/temporal-event-feed.test.ts',
];

/** Outside the rooms' own folders: tests of one pure function or renderer, no process. */
const pureElsewhere = [
  'test/cli/pinned-start.test.ts',
  'test/command-view.test.ts',
  'test/engine/analysis/measure-window.test.ts',
  'test/engine/drivers/port-pool.test.ts',
  'test/engine/heal/self-heal.test.ts',
  'test/engine/services/pin-error.test.ts',
  'test/engine/store/state-dir.test.ts',
  'test/host-port.test.ts',
  'test/loader.test.ts',
  'test/migration-step.test.ts',
  'test/plan-drift.test.ts',
  'test/plan.test.ts',
  'test/render.test.ts',
  'test/test-layout.test.ts',
  'test/router/replication-lag.test.ts',
  'test/router/request-checks.test.ts',
  'test/router/request-head.test.ts',
  'test/router/websocket-frames.test.ts',
  'test/verb-wait.test.ts',
  'test/watch/trigger-match.test.ts',
];

/** Tests that start a real Podman, nginx, haproxy, Caddy, Prometheus, PostgreSQL or redis-server. */
const infraFiles = [
  'test/caddy/**/*.test.ts',
  'test/cutover/container-*.test.ts',
  'test/cutover/progressive-prometheus.test.ts',
  'test/cutover/stateful-postgres.test.ts',
  'test/cutover/stateful-redis.test.ts',
  'test/drift.test.ts',
  'test/engine/analysis/prometheus.test.ts',
  'test/engine/drivers/container-*.test.ts',
  'test/engine/drivers/postgres-*.test.ts',
  'test/engine/drivers/redis-*.test.ts',
  'test/examples/containers-example.test.ts',
  'test/nginx/**/*.test.ts',
  'test/router/control-listen.test.ts',
  'test/haproxy/**/*.test.ts',
  'test/router/differential.test.ts',
  'test/router/websocket-differential.test.ts',
  'test/router/tls-differential.test.ts',
];

/** Integration tests that replace a module with `vi.mock` (node:fs, to interleave or fail its calls). */
const mockingFiles = [
  'test/e2e/claim-race.test.ts',
  'test/e2e/resume-race.test.ts',
  'test/faults/claim-lock-race.test.ts',
  'test/router/watch-table.test.ts',
];

/** Tests that need the Temporal dev server. */
const temporalFiles = [
  'test/temporal/**/*.test.ts',
  'test/modes/engine-acceptance.test.ts',
  'test/modes/temporal-unreachable.test.ts',
  'test/port-in-use.test.ts',
];

/** The projects' names (vitest.config.ts). */
export type ProjectName = 'unit' | 'integration' | 'isolated' | 'temporal' | 'infra';

export const projectFiles: Record<ProjectName, ProjectFiles> = {
  unit: {
    include: [
      'test/core/**/*.test.ts',
      'test/views/**/*.test.ts',
      'test/property/**/*.test.ts',
      ...pureTemporal,
      ...pureElsewhere,
    ],
    exclude: [],
  },
  integration: {
    include: [
      'test/*.test.ts',
      'test/cli/**/*.test.ts',
      'test/cutover/**/*.test.ts',
      'test/e2e/**/*.test.ts',
      'test/engine/**/*.test.ts',
      'test/examples/**/*.test.ts',
      'test/faults/**/*.test.ts',
      'test/honest/**/*.test.ts',
      'test/router/**/*.test.ts',
      'test/secrets/**/*.test.ts',
      'test/server/**/*.test.ts',
      'test/watch/**/*.test.ts',
    ],
    exclude: [...pureElsewhere, ...infraFiles, ...temporalFiles, ...mockingFiles],
  },
  isolated: { include: mockingFiles, exclude: [] },
  temporal: { include: temporalFiles, exclude: pureTemporal },
  infra: { include: infraFiles, exclude: [] },
};
