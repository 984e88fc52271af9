import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Seconds each of the slowest files took on a quiet CI run (2 cores, 3 workers): every file over
 * 10 s in the last passing fresh-clone run (session 12's ci6), as vitest reports each file. Only
 * their order matters: a file that became slow, or fast, moves here when a run shows it. Files
 * changed since that run carry their time measured alone beside the old version (stateful-switch,
 * write-sites, state-dir, slow-bodies, listen-failure and recipes: session 13, idle waits cut).
 */
export const ciSeconds: Record<string, number> = {
  'test/temporal/stateful-switch.test.ts': 105,
  'test/faults/write-sites.test.ts': 70,
  'test/e2e/recipes.test.ts': 42,
  'test/engine/drivers/postgres-replication.test.ts': 39,
  'test/engine/drivers/container-driver.test.ts': 30,
  'test/cutover/stateful-postgres.test.ts': 50,
  'test/cutover/zero-downtime.test.ts': 29,
  'test/router/slow-bodies.test.ts': 28,
  'test/cutover/container-zero-downtime.test.ts': 28,
  'test/cutover/progressive-prometheus.test.ts': 28,
  'test/cutover/parallel-zero-downtime.test.ts': 22,
  'test/cutover/rollback-to-layout.test.ts': 22,
  'test/temporal/robustness.test.ts': 21,
  'test/temporal/resolve.test.ts': 21,
  'test/modes/engine-acceptance.test.ts': 20,
  'test/e2e/crash.test.ts': 19,
  'test/router/upstream-client.test.ts': 19,
  'test/temporal/no-worker.test.ts': 18,
  // New this session, not from a CI run yet: measured alone on this machine under load.
  'test/cutover/stateful-kill.test.ts': 30,
  'test/cutover/stateful-redis.test.ts': 25,
  'test/cutover/stateful-kill-rollback.test.ts': 20,
  'test/engine/drivers/redis-replication.test.ts': 11,
  'test/cutover/stateful-lag.test.ts': 10,
  'test/honest/resolve.test.ts': 18,
  'test/server/contract.test.ts': 17,
  'test/temporal/secrets.test.ts': 17,
  'test/nginx/nginx-driver.test.ts': 16,
  'test/temporal/robustness-server-restart.test.ts': 16,
  'test/temporal/robustness-many.test.ts': 16,
  'test/router/listen-failure.test.ts': 16,
  'test/engine/drivers/container-review.test.ts': 15,
  'test/watch/local.test.ts': 15,
  'test/temporal/notifications.test.ts': 15,
  'test/cutover/progressive.test.ts': 15,
  'test/engine/drivers/container-replicate.test.ts': 14,
  'test/cutover/stateful-crash.test.ts': 14,
  'test/e2e/notifications.test.ts': 13,
  'test/faults/damaged-files.test.ts': 13,
  'test/cutover/green-lost-in-hold.test.ts': 13,
  'test/watch/remote.test.ts': 12,
  'test/engine/analysis/prometheus.test.ts': 11,
  'test/honest/adoption.test.ts': 11,
  'test/temporal/progressive.test.ts': 11,
  'test/temporal/dependency-refs.test.ts': 11,
  'test/cutover/container-green-lost.test.ts': 11,
  'test/server/fuzz.test.ts': 11,
  'test/migrate.test.ts': 11,
  'test/faults/state-dir.test.ts': 10,
  'test/temporal/observe-drift.test.ts': 10,
  'test/secrets/secrets.test.ts': 10,
  'test/drift.test.ts': 10,
};

/**
 * Runs the longest files first, whatever their project (vitest's own order runs the projects one
 * after the other, by name, and a fresh clone's files by size): with 3 workers, a long file that
 * starts late is the run's tail. A file's expected time is this machine's last run of it when
 * vitest remembers one (node_modules/.vite), else `ciSeconds`; files known neither way (short
 * ones, or new) come after, in vitest's order.
 */
export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    const root = this.ctx.config.root;
    const expectedMs = (spec: TestSpecification): number => {
      const file = spec.moduleId.startsWith(`${root}/`)
        ? spec.moduleId.slice(root.length + 1)
        : spec.moduleId;
      const remembered = this.ctx.cache.getFileTestResults(`${spec.project.name}:${file}`)?.duration;
      return remembered ?? (ciSeconds[file] ?? 0) * 1000;
    };
    const position = new Map(ordered.map((spec, index) => [spec, index]));
    return [...ordered].sort(
      (a, b) => expectedMs(b) - expectedMs(a) || (position.get(a) ?? 0) - (position.get(b) ?? 0),
    );
  }
}
