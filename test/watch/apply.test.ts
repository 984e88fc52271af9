/**
 * `cutover watch --apply`: a commit becomes a migration that completes; commits that land while it
 * is in flight wait (the newest one replaces an older waiting one) and the newest is applied after
 * it, never two at once. test/fixtures/gated holds its health gate until `<state>/release-gate`
 * exists, which keeps the first migration in flight as long as the test needs.
 */
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanUp,
  initRepo,
  migrations,
  type PlanJson,
  plannedVersion,
  readJson,
  reportPaths,
  startWatch,
  trackStateDir,
  waitForMigrations,
} from '../support/git.js';
import { releaseGate } from '../support/migrations.js';

afterEach(cleanUp);

const final = ['completed', 'rolled_back', 'cancelled', 'failed'];

describe('cutover watch --apply', () => {
  it('applies a commit as a migration, queues commits during it and applies the newest after it', async () => {
    const repo = await initRepo('test/fixtures/gated');
    const root = path.dirname(repo.dir);
    const out = path.join(root, 'out');
    const stateDir = trackStateDir(path.join(root, 'state'));
    // --verbose: each look that finds nothing to plan says so, which is how the test knows the
    // watcher looked at its waiting commit again; a short interval makes those looks come often.
    const watch = startWatch({
      repo: repo.dir,
      out,
      stateDir,
      extra: ['--apply', '--verbose', '--interval', '200ms'],
    });
    const initial = (await repo.head()).slice(0, 7);

    // The head at start is planned and applied: migration X, held at its health gate.
    await watch.line(new RegExp(`^\\S+ ${initial} topology\\.yaml \\(gated\\): Plan: 3 to add`));
    const started = await watch.line(
      new RegExp(`^\\S+ ${initial} topology\\.yaml \\(gated\\): migration (\\S+) started`),
    );
    const x = started.match[1] as string;

    // A commit during X: planned, and queued.
    repo.setVersion('api', '2');
    const second = await repo.commit('api 2');
    await watch.line(new RegExp(`^\\S+ ${second.short} topology\\.yaml \\(gated\\): Plan: `));
    await watch.line(
      new RegExp(`^\\S+ ${second.short} topology\\.yaml \\(gated\\): queued until ${x} ends$`),
    );
    // Another: it replaces the waiting one.
    repo.setVersion('api', '3');
    const third = await repo.commit('api 3');
    const replaced = await watch.line(
      new RegExp(
        `^\\S+ ${third.short} topology\\.yaml \\(gated\\): queued until ${x} ends \\(replaces ${second.short}\\)$`,
      ),
    );

    // Still one migration, in flight, for as long as the gate is held. Checks run one at a time and
    // each ends by applying what waits for a free environment: the second look after the queueing
    // one says that a whole look at the waiting commit, with X in flight, is over.
    const unmoved = new RegExp(`^\\S+ debug: ${third.short}: main has not moved; nothing to plan$`);
    const look = await watch.line(unmoved, { from: replaced.index + 1 });
    await watch.line(unmoved, { from: look.index + 1 });
    const during = await migrations(stateDir);
    expect(during.map((m) => m.id)).toEqual([x]);
    expect(final).not.toContain(during[0]?.lifecycle);
    expect(watch.matching(/migration \S+ started/)).toHaveLength(1);
    // Those looks left the waiting commit waiting, without a word (no second try, no refusal).
    expect(watch.matching(new RegExp(`${third.short} .*(queued|refused|not applied)`))).toHaveLength(1);

    releaseGate({ dir: root, file: repo.path(), stateDir, cleanup: async () => undefined });

    // X completes (the layout moves): the newest waiting commit's published plan is refused as
    // stale, and the commit is planned again against the new layout and applied.
    await watch.line(
      new RegExp(`^\\S+ ${third.short} topology\\.yaml \\(gated\\): refused: plan \\S+ is stale: `),
      { timeoutMs: 20_000 },
    );
    await watch.line(new RegExp(`^\\S+ ${third.short} topology\\.yaml \\(gated\\): planned again: `), {
      timeoutMs: 20_000,
    });
    const next = await watch.line(
      new RegExp(`^\\S+ ${third.short} topology\\.yaml \\(gated\\): migration (\\S+) started`),
      { timeoutMs: 20_000 },
    );
    const y = next.match[1] as string;
    expect(y).not.toBe(x);
    const done = await waitForMigrations(
      stateDir,
      (list) => list.length === 2 && list.every((m) => m.lifecycle === 'completed'),
    );
    const first = done.find((m) => m.id === x);
    const after = done.find((m) => m.id === y);
    // Never two in flight: Y started after X ended.
    expect(Date.parse(after?.startedAt ?? '')).toBeGreaterThanOrEqual(
      Date.parse(first?.endedAt ?? '') || Number.POSITIVE_INFINITY,
    );

    // The report of the applied commit is its plan against the layout X left (api 1 → 3).
    const plan = readJson<PlanJson>(reportPaths(out, 'gated', third.short).json);
    expect(plannedVersion(plan, 'api')).toBe('3');
    expect(
      plan.resources.find((r) => r.name === 'api')?.changes.find((c) => c.path === 'version')?.before,
    ).toBe('1');
    expect(plan.summary).toEqual({ add: 0, change: 1, remove: 0 });
    // The replaced commit was never applied; nothing else started.
    expect(watch.matching(new RegExp(`${second.short} .*migration \\S+ started`))).toEqual([]);
    expect(watch.matching(/migration \S+ started/)).toHaveLength(2);
    expect(watch.matching(/not applied|check failed/)).toEqual([]);
  });
});
