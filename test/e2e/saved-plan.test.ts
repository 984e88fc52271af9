/**
 * Saved plans end to end, as a pull request's CI would use them: `plan --out` against the live
 * layout in a real Git work tree, `apply` of exactly that plan (locally and through a real
 * `cutover server` on loopback), and every refusal: stale (another change applied first), another
 * topology (-f), not a saved plan, and a `--plan-id` that is no plan of this topology. The audit
 * (who started a migration, from which commit, with which plan) shows in `migration show` and the API.
 */
import { truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { osUserName } from '../../platform/os-user.js';
import { runCli } from '../support/cli.js';
import { cleanUp, initRepo, type Repo, startServer, trackStateDir } from '../support/git.js';

afterAll(cleanUp);

interface Saved {
  kind: string;
  plan: { planId: string; baseSerial: number };
  baseSerial: number;
  commit: string | null;
  digest: string;
  plannedAgainst: { serial: number; migrationId: string | null };
}

/** The CLI in the repository, with its own state directory (outside the work tree). */
function cliIn(repo: Repo, env: NodeJS.ProcessEnv = {}) {
  const stateDir = trackStateDir(path.join(path.dirname(repo.dir), 'state'));
  return (...args: string[]) => runCli(args, { cwd: repo.dir, env: { CUTOVER_STATE_DIR: stateDir, ...env } });
}

const savedIn = (repo: Repo, file: string): Saved => JSON.parse(repo.read(file)) as Saved;

describe('saved plans, locally', () => {
  it('plan --out then apply runs exactly the saved plan, recording who, which commit and which plan', async () => {
    const repo = await initRepo();
    const cli = cliIn(repo);
    const head = await repo.head();
    const planned = await cli('topology', 'plan', '--out', 'plan.json', '--format', 'markdown');
    expect(planned.code, planned.stderr).toBe(0);
    expect(planned.stdout).toContain('Planned against an empty environment (nothing migrated yet)');
    expect(planned.stdout).not.toContain('base serial');
    const saved = savedIn(repo, 'plan.json');
    expect(saved).toMatchObject({ kind: 'cutover/SavedPlan', baseSerial: 0, commit: head });

    const applied = await cli('topology', 'apply', 'plan.json', '--yes', '--json');
    expect(applied.code, applied.stderr).toBe(0);
    const out = JSON.parse(applied.stdout);
    expect(out.planId).toBe(saved.plan.planId);
    expect(out.summary).toMatchObject({ lifecycle: 'completed', planId: saved.plan.planId, commit: head });
    expect(out.summary.startedBy).toBe(osUserName());

    const shown = await cli('topology', 'migration', 'show', out.summary.id, '--json');
    expect(JSON.parse(shown.stdout).summary).toMatchObject({
      startedBy: osUserName(),
      commit: head,
      planId: saved.plan.planId,
    });
    const text = await cli('topology', 'migration', 'show', out.summary.id);
    expect(text.stdout).toContain(`by ${osUserName()}`);
    expect(text.stdout).toContain(`commit:    ${head}`);

    // The next plan's header names the layout that migration recorded, in words.
    const next = await cli('topology', 'plan', '--format', 'markdown');
    expect(next.stdout).toMatch(
      new RegExp(
        `against the live layout of exec-demo, serial 1, recorded by ${out.summary.id} on \\d{4}-\\d\\d-\\d\\d`,
      ),
    );
  });

  it('a saved plan refuses as stale once another change was applied first, naming both serials', async () => {
    const repo = await initRepo();
    const cli = cliIn(repo);
    expect((await cli('topology', 'migrate', '--yes')).code).toBe(0);
    repo.setVersion('api', '2');
    expect((await cli('topology', 'plan', '--out', 'first.json')).code).toBe(0);
    repo.setVersion('api', '3');
    expect((await cli('topology', 'plan', '--out', 'second.json')).code).toBe(0);
    const second = await cli('topology', 'apply', 'second.json', '--yes', '--json');
    expect(second.code, second.stderr).toBe(0);
    const moved = JSON.parse(second.stdout).summary.id as string;

    const stale = await cli('topology', 'apply', 'first.json', '--yes');
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(
      new RegExp(
        `^cutover: plan sha256:[0-9a-f]{12} is stale: the live layout of exec-demo has moved since it was planned, from serial 1 to serial 2 \\(recorded by ${moved} on [^)]+\\); plan again`,
      ),
    );
    expect(stale.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('apply -f refuses a topology file that is not the one planned (PLAN_MISMATCH, naming the file)', async () => {
    const repo = await initRepo();
    const cli = cliIn(repo);
    expect((await cli('topology', 'plan', '--out', 'plan.json')).code).toBe(0);
    // Comments only: the same normalised topology, so the same plan.
    repo.write(`# reviewed\n${repo.read()}`);
    // Run to its end: a plan made while it still runs is against serial 0, and stale once it commits.
    const same = await cli('topology', 'apply', 'plan.json', '-f', 'topology.yaml', '--yes');
    expect(same.code, same.stderr).toBe(0);
    expect((await cli('topology', 'plan', '--out', 'again.json')).code).toBe(0);
    repo.setVersion('api', '9');
    const other = await cli('topology', 'apply', 'again.json', '-f', 'topology.yaml', '--yes');
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(
      /^cutover: topology\.yaml is not the topology again\.json was planned from \(its content differs; .*\): plan topology\.yaml again with --out and review the new plan, then apply it with the same -f \(it is what checks that the reviewed plan is of this file\)\n$/,
    );
    // The saved topology is a dirty file's: no commit holds it.
    expect(savedIn(repo, 'again.json').commit).toBeNull();
  });

  it('apply refuses what is not a saved plan, saying what it is (PLAN_INVALID)', async () => {
    const repo = await initRepo();
    const cli = cliIn(repo);
    const md = await cli('topology', 'plan', '--format', 'markdown');
    repo.write(md.stdout, 'plan.md');
    const rendering = await cli('topology', 'plan', '--json');
    repo.write(rendering.stdout, 'rendering.json');
    expect((await cli('topology', 'plan', '--out', 'plan.json')).code).toBe(0);
    repo.write(repo.read('plan.json').replace('"formatVersion": "1"', '"formatVersion": "7"'), 'future.json');
    // Its topology edited by hand, keeping the digest and the plan id: what apply would run is not the plan.
    const edited = JSON.parse(repo.read('plan.json'));
    edited.topology.text = edited.topology.text.replace(/version: "1"/, 'version: "666"');
    expect(edited.topology.text).toContain('"666"');
    repo.write(JSON.stringify(edited), 'edited.json');

    const cases: [string, RegExp][] = [
      [
        'plan.md',
        /^cutover: plan\.md is not a saved plan: not JSON \(it looks like a plan rendering, which a review shows; apply takes the JSON that `plan --out` saves\); make one with `cutover topology plan --out plan\.json`$/,
      ],
      [
        'rendering.json',
        /^cutover: rendering\.json is not a saved plan: it is a plan rendering .*save one with --out/,
      ],
      ['future.json', /^cutover: future\.json is not a saved plan: formatVersion "7" is unknown/],
      [
        'edited.json',
        /^cutover: edited\.json is not a saved plan: topology\.text was edited after the plan was saved \(it is not the topology of digest sha256:[0-9a-f]{12}\); make one/,
      ],
    ];
    for (const [file, message] of cases) {
      const refused = await cli('topology', 'apply', file, '--yes');
      expect(refused.code, file).toBe(1);
      expect(refused.stderr.trim(), file).toMatch(message);
    }
    const json = await cli('topology', 'apply', 'edited.json', '--yes', '--json');
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout).error).toMatchObject({ code: 'PLAN_INVALID' });
    expect(JSON.parse((await cli('topology', 'migration', 'list', '--json')).stdout).items).toEqual([]);
  });

  it('apply refuses a plan file too large to be a saved plan before reading it, in one line', async () => {
    const repo = await initRepo();
    const cli = cliIn(repo);
    // Sparse: no disk used. Larger than any string Node can hold, so reading it whole would crash.
    const huge = path.join(repo.dir, 'huge.json');
    writeFileSync(huge, '');
    truncateSync(huge, 600 * 1024 * 1024);
    const refused = await cli('topology', 'apply', 'huge.json', '--yes');
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toMatch(
      /^cutover: huge\.json is not a saved plan: it is 600 MiB, and the largest saved plan this cutover reads is \d+ MiB; make one with `cutover topology plan --out huge\.json`$/,
    );
    const json = await cli('topology', 'apply', 'huge.json', '--yes', '--json');
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout).error).toMatchObject({ code: 'PLAN_INVALID' });
    expect(json.stderr).toBe('');
  });

  it('migrate --plan-id with an id of no plan of this topology says so, not "the file changed"', async () => {
    const repo = await initRepo();
    const cli = cliIn(repo);
    expect((await cli('topology', 'migrate', '--yes')).code).toBe(0);
    repo.setVersion('api', '2');
    const madeUp = `sha256:${'ab'.repeat(32)}`;
    const refused = await cli('topology', 'migrate', '--plan-id', madeUp, '--yes');
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toMatch(
      /^cutover: plan id sha256:abababababab is not a plan of this topology against the live layout \(serial 1\) or a recent one: it may have been computed against another branch's file \(--against-ref\) or another topology; plan again against the live layout/,
    );
    expect(refused.stderr).not.toContain('changed since it was planned');
    // A plan of the same file against the main branch's file (as a PR comment made it) is told the same way.
    await repo.commit('api 2');
    const review = JSON.parse((await cli('topology', 'plan', '--against-ref', 'HEAD~1', '--json')).stdout);
    const reviewed = await cli('topology', 'migrate', '--plan-id', review.planId, '--yes');
    expect(reviewed.stderr).toContain('is not a plan of this topology against the live layout (serial 1)');
    // migrate --commit is recorded.
    const sha = await repo.head();
    const done = await cli('topology', 'migrate', '--yes', '--json', '--commit', sha);
    expect(JSON.parse(done.stdout).summary.commit).toBe(sha);
  });
});

describe('saved plans through a cutover server', () => {
  const token = 'c1-operator-token-0123456789abcdef';

  it('plans, applies and audits through the server; refusals come back as problems', async () => {
    const repo = await initRepo();
    // The server's working directory is the repository: the saved file's paths resolve there.
    const { url } = await startServer(path.join(repo.dir, '.server-state'), {
      CUTOVER_TOKENS: `ci-bot:operator:${token}`,
    });
    const cli = (...args: string[]) =>
      runCli([...args, '--server', url], { cwd: repo.dir, env: { CUTOVER_TOKEN: token } });
    const head = await repo.head();
    expect((await cli('topology', 'plan', '--out', 'plan.json')).code).toBe(0);
    const saved = savedIn(repo, 'plan.json');
    expect(saved).toMatchObject({ kind: 'cutover/SavedPlan', commit: head, baseSerial: 0 });
    const applied = await cli('topology', 'apply', 'plan.json', '--yes', '--json');
    expect(applied.code, applied.stderr + applied.stdout).toBe(0);
    const { summary } = JSON.parse(applied.stdout);
    expect(summary).toMatchObject({
      lifecycle: 'completed',
      planId: saved.plan.planId,
      commit: head,
      startedBy: 'ci-bot',
    });

    const api = (method: string, route: string, body?: unknown) =>
      fetch(`${url}${route}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    const shown = (await (await api('GET', `/v1/migrations/${summary.id}`)).json()) as { summary: unknown };
    expect(shown.summary).toMatchObject({ startedBy: 'ci-bot', commit: head, planId: saved.plan.planId });

    // The same saved plan again: the layout moved (serial 0 → 1), 409 PLAN_STALE.
    const stale = await api('POST', '/v1/apply', { plan: saved });
    expect(stale.status).toBe(409);
    const problem = (await stale.json()) as { code: string; detail: string };
    expect(problem.code).toBe('PLAN_STALE');
    expect(problem.detail).toContain(`from serial 0 to serial 1 (recorded by ${summary.id}`);

    // Not a saved plan: 422 PLAN_INVALID saying what it is.
    const invalid = await api('POST', '/v1/apply', { plan: saved.plan });
    expect(invalid.status).toBe(422);
    const invalidProblem = (await invalid.json()) as { code: string; detail: string };
    expect(invalidProblem.code).toBe('PLAN_INVALID');
    expect(invalidProblem.detail).toMatch(
      /^plan is not a saved plan: it is a plan rendering .*POST \/v1\/plan with `saved: true`/,
    );

    // Edited by hand after it was saved (the digest and id kept): 422 PLAN_INVALID, not a mismatch.
    const edited = {
      ...saved,
      topology: { file: 'topology.yaml', text: repo.read().replace(/version: "1"/, 'version: "666"') },
    };
    const tampered = await api('POST', '/v1/apply', { plan: edited });
    expect(tampered.status).toBe(422);
    expect(((await tampered.json()) as { detail: string }).detail).toMatch(
      /^plan is not a saved plan: topology\.text was edited after the plan was saved/,
    );

    // POST /v1/plan {saved: true} answers the saved plan itself.
    const fresh = await api('POST', '/v1/plan', {
      topology: repo.read(),
      path: 'topology.yaml',
      saved: true,
      commit: head,
    });
    expect(fresh.status).toBe(200);
    expect(await fresh.json()).toMatchObject({
      kind: 'cutover/SavedPlan',
      baseSerial: 1,
      commit: head,
      plannedAgainst: { kind: 'live', serial: 1, migrationId: summary.id },
    });
  });
});
