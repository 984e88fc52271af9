import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Seconds each of the slowest files took on a quiet CI run (2 cores, 3 workers), as the run's
 * closing list of the 25 slowest files prints them. Only their order matters: a file that became
 * slow, or fast, moves here when that list shows it.
 */
export const ciSeconds: Record<string, number> = {
  'test/faults/write-sites.test.ts': 78,
  'test/cutover/rollback-to-layout.test.ts': 63,
  'test/e2e/recipes.test.ts': 60,
  'test/cutover/zero-downtime.test.ts': 48,
  'test/router/slow-bodies.test.ts': 33,
  'test/temporal/robustness-server-restart.test.ts': 26,
  'test/temporal/robustness.test.ts': 25,
  'test/cutover/progressive-prometheus.test.ts': 25,
  'test/e2e/crash.test.ts': 25,
  'test/secrets/secrets.test.ts': 23,
  'test/cutover/container-zero-downtime.test.ts': 23,
  'test/engine/drivers/container-driver.test.ts': 23,
  'test/temporal/resolve.test.ts': 23,
  'test/faults/state-dir.test.ts': 22,
  // Not from a CI run yet: this machine's, under load (refresh from the next CI list).
  'test/cutover/stateful-kill.test.ts': 30,
  'test/cutover/stateful-kill-rollback.test.ts': 20,
  'test/router/upstream-client.test.ts': 21,
  'test/modes/engine-acceptance.test.ts': 21,
  'test/temporal/notifications.test.ts': 21,
  'test/migrate.test.ts': 20,
  'test/server/contract.test.ts': 20,
  'test/cutover/parallel-zero-downtime.test.ts': 19,
  'test/router/listen-failure.test.ts': 19,
  'test/e2e/status-self-heal.test.ts': 19,
  'test/honest/resolve.test.ts': 18,
  'test/temporal/no-worker.test.ts': 17,
  'test/engine/drivers/container-replicate.test.ts': 17,
  'test/nginx/nginx-driver.test.ts': 16,
  'test/watch/local.test.ts': 16,
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
