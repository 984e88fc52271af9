import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Seconds each of the slowest files took on a fresh-clone CI run (2 cores, 3 workers): every file
 * of 8 s or more in session 16's ci30, as vitest reports each file. Only their order matters: a
 * file that became slow, or fast, moves here when a run shows it.
 */
export const ciSeconds: Record<string, number> = {
  // ci30 (session 16, 3 files at once), files of 8 s or more; recipes as s16/integ left it.
  'test/e2e/recipes.test.ts': 75,
  'test/cutover/stateful-postgres.test.ts': 58,
  'test/temporal/stateful-switch.test.ts': 57,
  'test/faults/write-sites.test.ts': 49,
  'test/cutover/zero-downtime.test.ts': 43,
  // s17/ui's browser tests, alone on a loaded machine (load average 10-25): 30-51 s.
  'test/server/dashboard.test.ts': 40,
  'test/cutover/container-zero-downtime.test.ts': 38,
  'test/cutover/stateful-kill.test.ts': 30,
  'test/cutover/progressive-prometheus.test.ts': 29,
  'test/temporal/hosts-wait.test.ts': 28,
  'test/engine/drivers/container-driver.test.ts': 27,
  'test/router/slow-bodies.test.ts': 27,
  'test/temporal/notifications.test.ts': 27,
  'test/engine/drivers/postgres-replication.test.ts': 25,
  // s17/caddy, measured alone at load 17-25 (21 s of tests), not on a CI run yet.
  'test/caddy/caddy-migrations.test.ts': 25,
  'test/temporal/resolve.test.ts': 24,
  'test/temporal/hosts-netns.test.ts': 24,
  'test/engine/drivers/container-replicate.test.ts': 22,
  'test/temporal/hosts.test.ts': 22,
  'test/cutover/parallel-zero-downtime.test.ts': 20,
  // Not from a CI run yet: alone at load 19 on this machine (s17/tls), 20 s of tests after its first deployment.
  'test/cutover/tls-zero-downtime.test.ts': 25,
  'test/cutover/stateful-kill-rollback.test.ts': 20,
  'test/watch/local.test.ts': 18,
  'test/router/upstream-client.test.ts': 18,
  'test/nginx/nginx-driver.test.ts': 17,
  'test/haproxy/haproxy-migration.test.ts': 17, // measured alone (s17), not yet in a CI run
  'test/temporal/no-worker.test.ts': 17,
  'test/honest/resolve.test.ts': 17,
  'test/e2e/crash.test.ts': 16,
  'test/cutover/rollback-to-layout.test.ts': 15,
  'test/modes/engine-acceptance.test.ts': 15,
  'test/router/listen-failure.test.ts': 15,
  'test/engine/drivers/container-review.test.ts': 14,
  'test/cutover/progressive.test.ts': 14,
  'test/server/fuzz.test.ts': 14,
  'test/engine/sources/check-aside.test.ts': 14,
  'test/temporal/robustness.test.ts': 14,
  'test/temporal/robustness-server-restart.test.ts': 13,
  'test/temporal/robustness-many.test.ts': 13,
  'test/cutover/stateful-redis.test.ts': 13,
  'test/cutover/green-lost-in-hold.test.ts': 12,
  'test/server/contract.test.ts': 12,
  'test/cutover/stateful-crash.test.ts': 12,
  'test/cutover/routes-together.test.ts': 12,
  'test/cutover/container-green-lost.test.ts': 11,
  'test/honest/adoption.test.ts': 11,
  'test/engine/analysis/prometheus.test.ts': 11,
  'test/watch/remote.test.ts': 11,
  'test/temporal/progressive.test.ts': 11,
  'test/e2e/notifications.test.ts': 11,
  'test/temporal/observe-drift.test.ts': 11,
  'test/migrate.test.ts': 10,
  'test/tutorial.test.ts': 10,
  'test/temporal/dependency-refs.test.ts': 10,
  'test/engine/drivers/redis-replication.test.ts': 10,
  'test/e2e/demo-interrupt.test.ts': 9,
  'test/temporal/keep-layouts.test.ts': 9,
  'test/drift.test.ts': 9,
  'test/property/load-topology.property.test.ts': 8,
  'test/parallelism.test.ts': 8,
  'test/server/shutdown.test.ts': 8,
};

/**
 * Runs the longest files first, whatever their project (vitest's own order runs the projects one
 * after the other, by name, and a fresh clone's files by size): with 3 workers, a long file that
 * starts late is the run's tail. A file's expected time is this machine's last run of it when
 * vitest remembers one (node_modules/.vite), else `ciSeconds`; files known neither way (short
 * ones, or new) come after, in vitest's order.
 */
/**
 * Files run after every other, whatever their time: test/bench-ratios.test.ts (npm run bench:quick),
 * whose migration under 500 requests/s must fail no request. Started among the long files it
 * failed once in four runs (ci45: the load generator saturated while the CLI started, the "before"
 * p99 at 650 ms); run last, it shares the cores only with the run's last, short files.
 */
export const runLast = new Set(['test/bench-ratios.test.ts']);

/**
 * Files expected to take at least this long run first, longest first, whatever their project; the
 * others follow grouped by project.
 */
export const longFileMs = 8_000;

/** The order of the projects' blocks of short files: the quickest files last. */
const projectOrder = ['integration', 'infra', 'temporal', 'isolated', 'unit'];

/**
 * vitest hands a worker that ran a file of a non-isolated project (isolate: false) the next file
 * only when the next file in its queue is of the same project; otherwise it stops the worker, and
 * the next file of that project starts a new one that imports everything again. Sorted by time
 * alone, the projects alternate: the unit project's 58 files ran in 33 threads, most for one file
 * (session 20, ci70). So only the long files, whose order makes the run's tail, go by time; the
 * short ones follow in blocks of one project each. Measured on fresh clones (ci70 → ci71): vitest's
 * main process, where the unit threads run, 61.7 → 56.7 CPU-seconds; the forks about as many (68,
 * 64), most of them for the infra project's files, each isolated then.
 */
export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ordered = await super.sort(files);
    const root = this.ctx.config.root;
    const fileOf = (spec: TestSpecification): string =>
      spec.moduleId.startsWith(`${root}/`) ? spec.moduleId.slice(root.length + 1) : spec.moduleId;
    const expected = new Map(
      ordered.map((spec) => {
        const file = fileOf(spec);
        const remembered = this.ctx.cache.getFileTestResults(`${spec.project.name}:${file}`)?.duration;
        return [spec, remembered ?? (ciSeconds[file] ?? 0) * 1000] as const;
      }),
    );
    const position = new Map(ordered.map((spec, index) => [spec, index]));
    const byTime = (a: TestSpecification, b: TestSpecification) =>
      (expected.get(b) ?? 0) - (expected.get(a) ?? 0) || (position.get(a) ?? 0) - (position.get(b) ?? 0);
    const block = (spec: TestSpecification) => {
      const index = projectOrder.indexOf(spec.project.name);
      return index === -1 ? projectOrder.length : index;
    };
    const last = ordered.filter((spec) => runLast.has(fileOf(spec)));
    const rest = ordered.filter((spec) => !runLast.has(fileOf(spec)));
    const long = rest.filter((spec) => (expected.get(spec) ?? 0) >= longFileMs).sort(byTime);
    const short = rest
      .filter((spec) => (expected.get(spec) ?? 0) < longFileMs)
      .sort((a, b) => block(a) - block(b) || byTime(a, b));
    return [...long, ...short, ...last];
  }
}
