/**
 * `cutover watch` on a local repository (its refs watched): the real CLI in a child process, a real
 * Git repository in a temporary directory, reports read from disk.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import {
  type Commit,
  cleanUp,
  initRepo,
  migrateBaseline,
  migrations,
  type PlanJson,
  plannedVersion,
  readJson,
  reportPaths,
  scratch,
  startWatch,
  trackStateDir,
  waitForFile,
  waitForMigrations,
} from '../support/git.js';

afterEach(cleanUp);

async function setup(options: { baseline?: boolean; extra?: string[] } = {}) {
  const repo = await initRepo('examples/exec-demo');
  const root = path.dirname(repo.dir);
  const out = path.join(root, 'out');
  const stateDir = trackStateDir(path.join(root, 'state'));
  if (options.baseline) await migrateBaseline(repo, stateDir);
  const watch = startWatch({
    repo: repo.dir,
    out,
    stateDir,
    ...(options.extra ? { extra: options.extra } : {}),
  });
  const initial = (await repo.head()).slice(0, 7);
  // The head at start is looked at once refs are watched: its line means the watcher is ready.
  await watch.line(new RegExp(`^\\S+ ${initial} topology\\.yaml \\(exec-demo\\): `));
  return { repo, out, stateDir, watch, initial };
}

/** The commits the watcher planned, in order, from its `<short> topology.yaml (exec-demo): …` lines. */
function plannedShorts(lines: string[]): string[] {
  return lines.flatMap((l) => {
    const m = /^\S+ ([0-9a-f]{7}) topology\.yaml \(exec-demo\): (?!queued|migration)/.exec(l);
    return m ? [m[1] as string] : [];
  });
}

describe('cutover watch, local repository', () => {
  it('plans a commit that changes the topology within one second, with the right actions', async () => {
    const { repo, out, watch } = await setup({ baseline: true });
    repo.setVersion('db', '2');
    const commit = await repo.commit('db 2');
    const report = reportPaths(out, 'exec-demo', commit.short);
    const seen = await waitForFile(report.json, 10_000);
    const line = await watch.line(new RegExp(`^\\S+ ${commit.short} topology\\.yaml \\(exec-demo\\): `));
    expect(seen - commit.at, 'commit → report file').toBeLessThan(1000);
    expect(line.at - commit.at, 'commit → log line').toBeLessThan(1000);
    expect(line.text).toContain('Plan: 0 to add, 2 to change, 0 to remove; 9 actions.');
    expect(line.text).toContain(`→ ${report.md}`);

    const plan = readJson<PlanJson>(report.json);
    expect(plan.environment).toBe('exec-demo');
    expect(plan.summary).toEqual({ add: 0, change: 2, remove: 0 });
    // db's version changed: db and api (which depends on it) are replaced, green before blue.
    expect(plan.actions.map((a) => a.id)).toEqual([
      'provision_green:db',
      'provision_green:api',
      'replicate:db',
      'health_gate:db',
      'health_gate:api',
      'drain_blue:api',
      'drain_blue:db',
      'commit:api',
      'commit:db',
    ]);
    expect(plannedVersion(plan, 'db')).toBe('2');
    const md = readFileSync(report.md, 'utf8');
    expect(md).toContain(`Commit \`${commit.short}\` of \`main\`, \`topology.yaml\`.`);
    expect(md).toContain('provision_green');
  });

  it('plans a burst of 20 commits at most once per topology state, the last always; ignores other files', async () => {
    // --verbose: the watcher says when a look found nothing to do; a safety poll every second
    // makes such a look come soon after the burst.
    const { repo, out, watch, initial } = await setup({
      baseline: true,
      extra: ['--verbose', '--interval', '1s'],
    });
    const versionOf = new Map<string, string>();
    let last: Commit | undefined;
    for (let i = 1; i <= 20; i++) {
      repo.setVersion('db', `burst-${i}`);
      last = await repo.commit(`db burst-${i}`);
      versionOf.set(last.short, `burst-${i}`);
    }
    const final = last as Commit;
    const finalReport = reportPaths(out, 'exec-demo', final.short);
    await waitForFile(finalReport.json, 10_000);
    const finalLine = await watch.line(new RegExp(`^\\S+ ${final.short} topology\\.yaml \\(exec-demo\\): `));
    expect(plannedVersion(readJson<PlanJson>(finalReport.json), 'db')).toBe('burst-20');
    // A whole look at the head after the final plan, finding nothing: the watcher has nothing of
    // the burst left in hand.
    await watch.line(new RegExp(`^\\S+ debug: ${final.short}: main has not moved; nothing to plan$`), {
      from: finalLine.index + 1,
    });

    const planned = plannedShorts(watch.out.map((l) => l.text));
    expect(planned[0]).toBe(initial);
    const burst = planned.slice(1);
    // Each commit at most once, in commit order, and each report holds its own commit's version.
    expect(new Set(burst).size).toBe(burst.length);
    expect(burst.at(-1)).toBe(final.short);
    const order = [...versionOf.keys()];
    expect(burst.map((s) => order.indexOf(s))).toEqual(
      [...burst.map((s) => order.indexOf(s))].sort((a, b) => a - b),
    );
    for (const short of burst) {
      expect(versionOf.has(short), `${short} is one of the burst`).toBe(true);
      const plan = readJson<PlanJson>(reportPaths(out, 'exec-demo', short).json);
      expect(plannedVersion(plan, 'db')).toBe(versionOf.get(short));
    }
    // Reports exist only for planned commits.
    const files = readdirSync(path.join(out, 'exec-demo')).filter((f) => f.endsWith('.plan.json'));
    expect(files.sort()).toEqual([initial, ...burst].map((s) => `${s}.plan.json`).sort());
    expect(watch.matching(/check failed|fetch failed/)).toEqual([]);
    expect(watch.alive()).toBe(true);

    // A commit that leaves the topology as it was is not planned.
    const linesBefore = watch.out.length;
    repo.write('# notes\n', 'NOTES.md');
    const other = await repo.commit('notes only');
    // The watcher looked at that commit and found no topology change: by then any report of it
    // would have been written, and any line about it logged.
    await watch.line(new RegExp(`^\\S+ debug: ${other.short}: no topology file changed; nothing to plan$`), {
      from: linesBefore,
    });
    expect(existsSync(reportPaths(out, 'exec-demo', other.short).json)).toBe(false);
    expect(
      watch.out
        .slice(linesBefore)
        .map((l) => l.text)
        .filter((t) => !/^\S+ debug: /.test(t)),
    ).toEqual([]);

    // Still alive, and answering: the next topology commit is planned.
    repo.setVersion('db', 'after-burst');
    const after = await repo.commit('db after-burst');
    const seen = await waitForFile(reportPaths(out, 'exec-demo', after.short).json, 10_000);
    expect(seen - after.at).toBeLessThan(1000);
    expect(plannedVersion(readJson<PlanJson>(reportPaths(out, 'exec-demo', after.short).json), 'db')).toBe(
      'after-burst',
    );
  });

  it('reports a bad topology with located problems, applies nothing, and plans the next good commit', async () => {
    const { repo, out, stateDir, watch, initial } = await setup({
      extra: ['--apply', '--verbose', '--interval', '1s'],
    });
    // The head at start is applied: a migration of exec-demo, which completes at once.
    const started = await watch.line(
      new RegExp(`^\\S+ ${initial} topology\\.yaml \\(exec-demo\\): migration (\\S+) started`),
    );
    const firstId = started.match[1] as string;
    await waitForMigrations(stateDir, (list) => list.length === 1 && list[0]?.lifecycle === 'completed');

    const text = repo
      .read()
      .replace('stateful: true', 'stateful: maybe')
      .replace('dependsOn: [db]', 'dependsOn: [dbx]');
    repo.write(text);
    const bad = await repo.commit('broken topology');
    const line = await watch.line(
      new RegExp(`^\\S+ ${bad.short} topology\\.yaml: invalid, 2 problems \\(not applied\\)`),
    );
    const report = reportPaths(out, 'exec-demo', bad.short);
    expect(line.text).toContain(`→ ${report.md}`);
    // FILE:LINE:COL of each problem, where it is in the committed text.
    const lines = text.split('\n');
    const at = (needle: string, token: string) => {
      const i = lines.findIndex((l) => l.includes(needle));
      return `${i + 1}:${(lines[i] as string).indexOf(token) + 1}`;
    };
    const md = readFileSync(report.md, 'utf8');
    expect(md).toContain(
      `topology.yaml@${bad.short}:${at('stateful: maybe', 'maybe')} components.db.stateful:`,
    );
    expect(md).toContain(
      `topology.yaml@${bad.short}:${at('dependsOn: [dbx]', 'dbx')} components.api.dependsOn[0]: unknown component "dbx"`,
    );
    expect(md).toContain('nothing was planned or applied');
    const json = readJson<{
      valid: boolean;
      commit: string;
      diagnostics: { line: number; column: number; path: string }[];
    }>(report.json);
    expect(json.valid).toBe(false);
    expect(json.commit).toBe(bad.sha);
    expect(json.diagnostics.map((d) => `${d.line}:${d.column} ${d.path}`)).toEqual([
      `${at('stateful: maybe', 'maybe')} components.db.stateful`,
      `${at('dependsOn: [dbx]', 'dbx')} components.api.dependsOn[0]`,
    ]);
    // Nothing applied: a later look at the same head finds nothing to do, and by then a migration
    // of it would have been started.
    await watch.line(new RegExp(`^\\S+ debug: ${bad.short}: main has not moved; nothing to plan$`), {
      from: line.index + 1,
    });
    expect((await migrations(stateDir)).map((m) => m.id)).toEqual([firstId]);
    expect(watch.matching(new RegExp(`${bad.short}.*(migration|queued)`))).toEqual([]);

    // The next good commit is planned (and applied).
    repo.write(
      repo.read().replace('stateful: maybe', 'stateful: true').replace('dependsOn: [dbx]', 'dependsOn: [db]'),
    );
    repo.setVersion('api', '2');
    const good = await repo.commit('fixed, api 2');
    const goodLine = await watch.line(
      new RegExp(`^\\S+ ${good.short} topology\\.yaml \\(exec-demo\\): Plan: 0 to add, 1 to change`),
    );
    expect(goodLine.at - good.at).toBeLessThan(1000);
    expect(plannedVersion(readJson<PlanJson>(reportPaths(out, 'exec-demo', good.short).json), 'api')).toBe(
      '2',
    );
    await watch.line(
      new RegExp(`^\\S+ ${good.short} topology\\.yaml \\(exec-demo\\): migration \\S+ started`),
    );
    await waitForMigrations(
      stateDir,
      (list) => list.length === 2 && list.every((m) => m.lifecycle === 'completed'),
    );
  });

  it('logs a rewrite of history that is not a fast-forward, and plans the new head', async () => {
    const { repo, out, watch, initial } = await setup();
    repo.setVersion('db', '2');
    const a = await repo.commit('db 2');
    await waitForFile(reportPaths(out, 'exec-demo', a.short).json);
    // B does not descend from A: main is moved there at once, as a force-push does.
    await repo.git('checkout', '-q', '-b', 'rewrite', initial);
    repo.setVersion('db', '3');
    const b = await repo.commit('db 3, rewritten');
    await repo.git('update-ref', 'refs/heads/main', b.sha);
    const moved = await watch.line(
      new RegExp(
        `main moved from ${a.short} to ${b.short}, not a fast-forward \\(a force-push\\?\\); planning the new head`,
      ),
    );
    expect(moved.at - b.at).toBeLessThan(1500);
    await waitForFile(reportPaths(out, 'exec-demo', b.short).json, 5_000);
    expect(plannedVersion(readJson<PlanJson>(reportPaths(out, 'exec-demo', b.short).json), 'db')).toBe('3');
    expect(watch.alive()).toBe(true);
  });

  it('keeps running when the branch is deleted, and plans again once it is back', async () => {
    const { repo, out, watch } = await setup({ extra: ['--verbose', '--interval', '1s'] });
    await repo.git('checkout', '-q', '--detach');
    await repo.git('update-ref', '-d', 'refs/heads/main');
    const gone = await watch.line(/branch main does not exist any more \(deleted\?\); waiting for it$/);
    // Two more looks at the missing branch go by without a word more (but for --verbose's).
    const again = await watch.line(/^\S+ debug: branch main still does not exist$/, { from: gone.index + 1 });
    await watch.line(/^\S+ debug: branch main still does not exist$/, { from: again.index + 1 });
    expect(watch.alive()).toBe(true);
    expect(watch.matching(/^\S+ branch main does not exist/)).toHaveLength(1);

    repo.setVersion('db', '5');
    const c = await repo.commit('db 5, detached');
    await repo.git('update-ref', 'refs/heads/main', c.sha);
    await watch.line(new RegExp(`branch main is back at ${c.short}`));
    const seen = await waitForFile(reportPaths(out, 'exec-demo', c.short).json, 5_000);
    expect(seen - c.at).toBeLessThan(1500);
    expect(plannedVersion(readJson<PlanJson>(reportPaths(out, 'exec-demo', c.short).json), 'db')).toBe('5');
  });

  it('--once plans the head and exits 0, or 1 when the topology is invalid', async () => {
    const repo = await initRepo('examples/exec-demo');
    const root = await scratch();
    const out = path.join(root, 'out');
    const stateDir = trackStateDir(path.join(root, 'state'));
    const args = ['watch', '--repo', repo.dir, '--out', out, '--state-dir', stateDir, '--once'];
    const head = (await repo.head()).slice(0, 7);
    // EDITOR (npm sets it for scripts), PAGER and GIT_CONFIG_GLOBAL in the environment: simple-git
    // refused every command then, and the watcher said the branch did not exist.
    const ok = await runCli(args, { env: { EDITOR: 'vi', PAGER: 'less', GIT_CONFIG_GLOBAL: '/dev/null' } });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(new RegExp(`${head} topology\\.yaml \\(exec-demo\\): Plan: 2 to add`));
    const plan = readJson<PlanJson>(reportPaths(out, 'exec-demo', head).json);
    expect(plan.actions.map((a) => a.id).sort()).toEqual(
      ['health_gate:api', 'health_gate:db', 'provision_green:api', 'provision_green:db'].sort(),
    );

    repo.write(repo.read().replace('stateful: true', 'stateful: maybe'));
    const bad = await repo.commit('broken');
    const failed = await runCli(args);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(
      new RegExp(`${bad.short} topology\\.yaml: invalid, 1 problem \\(not applied\\)`),
    );
    // The problem itself is on the console too, as FILE@SHA:LINE:COL path: message.
    expect(failed.stdout).toMatch(
      new RegExp(`^\\S+   topology\\.yaml@${bad.short}:\\d+:\\d+ components\\.db\\.stateful: `, 'm'),
    );
    expect(readFileSync(reportPaths(out, 'exec-demo', bad.short).md, 'utf8')).toMatch(
      new RegExp(`topology\\.yaml@${bad.short}:\\d+:\\d+ components\\.db\\.stateful: `),
    );
    // Nothing was ever applied.
    expect(existsSync(path.join(stateDir, 'environments', 'exec-demo', 'migrations'))).toBe(false);
  });
  it('--once exits 1 on a branch that does not exist, and when --apply finds a migration in flight', async () => {
    const repo = await initRepo('test/fixtures/gated');
    const root = await scratch();
    const out = path.join(root, 'out');
    const stateDir = trackStateDir(path.join(root, 'state'));
    const args = ['watch', '--repo', repo.dir, '--out', out, '--state-dir', stateDir, '--once'];

    const missing = await runCli([...args, '--branch', 'no-such-branch']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('branch no-such-branch does not exist');
    expect(missing.stderr).toContain('its branches: main (choose one with --branch)');

    // The head is applied: a migration held at its health gate (until <state>/release-gate exists).
    const first = await runCli([...args, '--apply']);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    const started = /migration (\S+) started/.exec(first.stdout);
    expect(started).not.toBeNull();
    const x = (started as RegExpExecArray)[1] as string;

    // A commit while it is in flight: planned, not applied, and said so: exit 1.
    repo.setVersion('api', '2');
    const second = await repo.commit('api 2');
    const refused = await runCli([...args, '--apply']);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(
      new RegExp(
        `${second.short} topology\\.yaml \\(gated\\): not applied: migration ${x} is in flight; --once does not wait`,
      ),
    );
    expect(existsSync(reportPaths(out, 'gated', second.short).json)).toBe(true);
    expect((await migrations(stateDir)).map((m) => m.id)).toEqual([x]);

    // Once X is done, the same command applies the commit.
    writeFileSync(path.join(stateDir, 'release-gate'), '');
    await waitForMigrations(stateDir, (list) => list.every((m) => m.lifecycle === 'completed'));
    const again = await runCli([...args, '--apply']);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(again.stdout).toMatch(
      new RegExp(`${second.short} topology\\.yaml \\(gated\\): migration \\S+ started`),
    );
    await waitForMigrations(
      stateDir,
      (list) => list.length === 2 && list.every((m) => m.lifecycle === 'completed'),
    );
  });
  it('--apply keeps only the exported trees that live slots and the migration in flight need', async () => {
    const repo = await initRepo('examples/exec-demo');
    const root = await scratch();
    const stateDir = trackStateDir(path.join(root, 'state'));
    const args = ['watch', '--repo', repo.dir, '--out', path.join(root, 'out'), '--state-dir', stateDir];
    const trees = path.join(stateDir, 'watch', 'trees', 'exec-demo');
    const shas: string[] = [];
    // db at the first commit, then only api (which depends on db) changes: db's slot keeps running
    // from the first commit's tree.
    for (const version of ['1', '2', '3', '4']) {
      if (version !== '1') {
        repo.setVersion('api', version);
        await repo.commit(`api ${version}`);
      }
      shas.push(await repo.head());
      const run = await runCli([...args, '--once', '--apply']);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toMatch(/migration \S+ started/);
      await waitForMigrations(
        stateDir,
        (list) => list.length === shas.length && list.every((m) => m.lifecycle === 'completed'),
      );
    }
    // Applying the fourth removed the second's tree only: the first still runs db, the third is the
    // layout the fourth replaced, the fourth its own.
    expect(
      readdirSync(trees)
        .filter((e) => e !== 'migrations.json')
        .sort(),
    ).toEqual([shas[0], shas[2], shas[3]].sort());
    expect(existsSync(path.join(trees, shas[0] as string, 'infra', 'provision'))).toBe(true);
    expect((await migrations(stateDir)).map((m) => m.lifecycle)).toEqual([
      'completed',
      'completed',
      'completed',
      'completed',
    ]);
  });
});
