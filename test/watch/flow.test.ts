/**
 * The watcher follows the saved-plan flow (issue 19): it publishes a saved plan per commit and, with
 * `--apply`, applies exactly that plan by id (refused as stale when the layout moved, then planned
 * again); it logs each migration's end, and writes it into the report; a commit whose topology is
 * unchanged once normalised is not planned again; reports go into the state directory by default.
 * Real Git repositories in temporary directories, the real CLI in child processes.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import {
  cleanUp,
  initRepo,
  readJson,
  reportPaths,
  startWatch,
  trackStateDir,
  waitForMigrations,
} from '../support/git.js';
import { releaseGate } from '../support/migrations.js';

afterEach(cleanUp);

interface SavedPlanJson {
  kind: string;
  plan: { planId: string; baseSerial: number };
  commit: string | null;
}

interface OutcomeJson {
  state: string;
  migrationId?: string;
  planId: string;
  reason?: string;
}

function savedPlanOf(out: string, environment: string, short: string): SavedPlanJson {
  return readJson<SavedPlanJson>(path.join(out, environment, `${short}.saved-plan.json`));
}

async function planIdOf(stateDir: string, id: string): Promise<string> {
  const shown = await runCli(['topology', 'migration', 'show', id, '--json', '--state-dir', stateDir]);
  expect(shown.code, shown.stderr).toBe(0);
  const parsed = JSON.parse(shown.stdout) as { summary?: { planId: string }; planId?: string };
  return (parsed.summary?.planId ?? parsed.planId) as string;
}

describe('cutover watch follows the saved-plan flow', () => {
  it('does not plan again a commit that only changes comments, key order or quoting', async () => {
    const repo = await initRepo('examples/exec-demo');
    const root = path.dirname(repo.dir);
    const out = path.join(root, 'out');
    const stateDir = trackStateDir(path.join(root, 'state'));
    const watch = startWatch({ repo: repo.dir, out, stateDir });
    const initial = (await repo.head()).slice(0, 7);
    await watch.line(new RegExp(`^\\S+ ${initial} topology\\.yaml \\(exec-demo\\): Plan: `));

    // Same model: a comment added, the top-level keys reordered (metadata after kind moved last).
    const text = repo.read();
    const metadata = /^metadata:\n(?: {2}.*\n)+/m.exec(text)?.[0] as string;
    expect(metadata).toBeTruthy();
    repo.write(`# reviewed by ops\n${text.replace(metadata, '')}${metadata}# end\n`);
    const cosmetic = await repo.commit('comments and key order only');
    const seen = await watch.line(
      new RegExp(`^\\S+ ${cosmetic.short} topology\\.yaml \\(exec-demo\\): unchanged after normalising`),
    );
    expect(seen.text).toContain(`same as ${initial}`);
    expect(existsSync(reportPaths(out, 'exec-demo', cosmetic.short).md)).toBe(false);

    // A real change after it is planned, against the model of the first plan.
    repo.setVersion('db', '2');
    const change = await repo.commit('db 2');
    const line = await watch.line(new RegExp(`^\\S+ ${change.short} topology\\.yaml \\(exec-demo\\): `));
    expect(line.text).toContain('Plan: ');
    expect(watch.matching(new RegExp(`${cosmetic.short} .*Plan: `))).toEqual([]);
  });

  it('--apply applies the plan it published for the commit, by id, and logs its completion', async () => {
    const repo = await initRepo('examples/exec-demo');
    const root = path.dirname(repo.dir);
    const out = path.join(root, 'out');
    const stateDir = trackStateDir(path.join(root, 'state'));
    const watch = startWatch({ repo: repo.dir, out, stateDir, extra: ['--apply'] });
    const head = await repo.head();
    const short = head.slice(0, 7);

    const started = await watch.line(
      new RegExp(
        `^\\S+ ${short} topology\\.yaml \\(exec-demo\\): migration (\\S+) started, plan (sha256:\\S+)`,
      ),
    );
    const id = started.match[1] as string;
    const done = await watch.line(
      new RegExp(`^\\S+ ${short} topology\\.yaml \\(exec-demo\\): migration ${id} completed`),
      { timeoutMs: 30_000 },
    );
    expect(done.at).toBeGreaterThan(started.at);

    // The saved plan of the report is what ran: its id, its commit.
    const saved = savedPlanOf(out, 'exec-demo', short);
    expect(saved.kind).toBe('cutover/SavedPlan');
    expect(saved.commit).toBe(head);
    expect(saved.plan.planId.startsWith(started.match[2] as string)).toBe(true);
    expect(await planIdOf(stateDir, id)).toBe(saved.plan.planId);

    // The report says how it ended.
    const outcome = readJson<OutcomeJson>(path.join(out, 'exec-demo', `${short}.outcome.json`));
    expect(outcome).toMatchObject({ state: 'completed', migrationId: id, planId: saved.plan.planId });
    expect(readFileSync(reportPaths(out, 'exec-demo', short).md, 'utf8')).toContain(
      `Applied as migration \`${id}\`: completed`,
    );
  });

  it("--apply logs a failed migration's failure with its reason, and writes it into the report", async () => {
    const repo = await initRepo('test/fixtures/gated');
    // The gate fails at the first unhealthy check: the migration fails and rolls back by itself.
    repo.write(repo.read().replace('failureThreshold: 100', 'failureThreshold: 1'));
    const commit = await repo.commit('a gate that fails');
    const root = path.dirname(repo.dir);
    const out = path.join(root, 'out');
    const stateDir = trackStateDir(path.join(root, 'state'));
    const watch = startWatch({ repo: repo.dir, out, stateDir, extra: ['--apply'] });

    const started = await watch.line(
      new RegExp(`^\\S+ ${commit.short} topology\\.yaml \\(gated\\): migration (\\S+) started`),
    );
    const id = started.match[1] as string;
    const failed = await watch.line(
      new RegExp(`^\\S+ ${commit.short} topology\\.yaml \\(gated\\): migration ${id} failed: (.+)$`),
      { timeoutMs: 30_000 },
    );
    expect(failed.match[1]).toMatch(/health/i);
    const outcome = readJson<OutcomeJson>(path.join(out, 'gated', `${commit.short}.outcome.json`));
    expect(outcome.state).toBe('failed');
    expect(outcome.reason).toBe(failed.match[1]);
    expect(readFileSync(reportPaths(out, 'gated', commit.short).md, 'utf8')).toContain(
      `Applied as migration \`${id}\`: failed`,
    );
  });

  it('--apply applies a waiting commit by its published plan when the layout did not move, and refuses it as stale when it did', async () => {
    const repo = await initRepo('test/fixtures/gated');
    const root = path.dirname(repo.dir);
    const out = path.join(root, 'out');
    const stateDir = trackStateDir(path.join(root, 'state'));
    const watch = startWatch({ repo: repo.dir, out, stateDir, extra: ['--apply'] });
    const initial = (await repo.head()).slice(0, 7);
    const first = await watch.line(
      new RegExp(`^\\S+ ${initial} topology\\.yaml \\(gated\\): migration (\\S+) started`),
    );
    const x = first.match[1] as string;

    // B is planned and published while X is held at its gate, and waits.
    repo.setVersion('api', '2');
    const b = await repo.commit('api 2');
    await watch.line(new RegExp(`^\\S+ ${b.short} topology\\.yaml \\(gated\\): queued until ${x} ends$`));
    const published = savedPlanOf(out, 'gated', b.short).plan.planId;

    // X is rolled back: the layout did not move, so B's published plan is applied as it is.
    const rollback = await runCli(['topology', 'migration', 'rollback', x, '--state-dir', stateDir]);
    expect(rollback.code, rollback.stderr).toBe(0);
    await watch.line(new RegExp(`^\\S+ ${initial} topology\\.yaml \\(gated\\): migration ${x} rolled back`), {
      timeoutMs: 30_000,
    });
    const second = await watch.line(
      new RegExp(`^\\S+ ${b.short} topology\\.yaml \\(gated\\): migration (\\S+) started`),
      { timeoutMs: 30_000 },
    );
    const y = second.match[1] as string;
    expect(await planIdOf(stateDir, y)).toBe(published);

    // C waits for Y; Y completes (the layout moves): C's published plan is refused as stale, said
    // so, planned again against the new layout and applied.
    repo.setVersion('api', '3');
    const c = await repo.commit('api 3');
    await watch.line(new RegExp(`^\\S+ ${c.short} topology\\.yaml \\(gated\\): queued until ${y} ends$`));
    const stalePlan = savedPlanOf(out, 'gated', c.short).plan.planId;
    releaseGate({ dir: root, file: repo.path(), stateDir, cleanup: async () => undefined });
    await watch.line(new RegExp(`^\\S+ ${b.short} topology\\.yaml \\(gated\\): migration ${y} completed`), {
      timeoutMs: 30_000,
    });
    const refused = await watch.line(
      new RegExp(
        `^\\S+ ${c.short} topology\\.yaml \\(gated\\): refused: plan \\S+ is stale: .*; planning again`,
      ),
      { timeoutMs: 30_000 },
    );
    expect(refused.text).toContain('serial');
    await watch.line(new RegExp(`^\\S+ ${c.short} topology\\.yaml \\(gated\\): planned again: Plan: `));
    const third = await watch.line(
      new RegExp(`^\\S+ ${c.short} topology\\.yaml \\(gated\\): migration (\\S+) started`),
      { timeoutMs: 30_000 },
    );
    const z = third.match[1] as string;
    const replanned = savedPlanOf(out, 'gated', c.short).plan.planId;
    expect(replanned).not.toBe(stalePlan);
    expect(await planIdOf(stateDir, z)).toBe(replanned);
    await watch.line(new RegExp(`^\\S+ ${c.short} topology\\.yaml \\(gated\\): migration ${z} completed`), {
      timeoutMs: 30_000,
    });
    const list = await waitForMigrations(stateDir, (l) => l.length === 3);
    expect(list.map((m) => m.lifecycle).sort()).toEqual(['completed', 'completed', 'rolled_back']);
  });

  it('writes reports into the state directory by default, never into the working tree', async () => {
    const repo = await initRepo('examples/exec-demo');
    const root = path.dirname(repo.dir);
    const stateDir = trackStateDir(path.join(root, 'state'));
    const short = (await repo.head()).slice(0, 7);
    // Run from inside the working tree, as `cutover watch --repo .` is.
    const run = await runCli(['watch', '--repo', '.', '--state-dir', stateDir, '--once'], { cwd: repo.dir });
    expect(run.code, run.stderr + run.stdout).toBe(0);
    const expected = reportPaths(path.join(stateDir, 'watch', 'reports'), 'exec-demo', short);
    expect(run.stdout).toContain(`→ ${expected.md}`);
    expect(existsSync(expected.md)).toBe(true);
    expect(existsSync(expected.json)).toBe(true);
    expect(await repo.git('status', '--porcelain', '--untracked-files=all')).toBe('');
  });
});
