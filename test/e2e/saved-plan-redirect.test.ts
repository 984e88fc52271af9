/**
 * Issue 26, item 6: a saved plan's `topology.file` decides where its relative paths resolve, so
 * which programs run. Edited to point at another directory (holding the same topology and other
 * scripts), `apply` without -f must refuse rather than run those scripts; through a server, a
 * saved plan (or a request) naming a path outside `--workdir` is refused even when its seal was
 * recomputed by whoever edited it.
 */
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { savedPlanSealOf } from '../../core/plan/plan-id.js';
import type { SavedPlan } from '../../core/plan/saved-plan.js';
import { runCli } from '../support/cli.js';
import { cleanUp, initRepo, type Repo, startServer, trackStateDir } from '../support/git.js';

afterAll(cleanUp);

/**
 * A copy of the repository beside it whose provision script first leaves a mark: the topology is
 * the same text, so only where it runs tells the two apart.
 */
function lookalike(repo: Repo): { dir: string; ran: string } {
  const dir = path.join(path.dirname(repo.dir), 'elsewhere');
  cpSync(repo.dir, dir, { recursive: true, filter: (from) => path.basename(from) !== '.git' });
  const ran = path.join(dir, 'ran');
  const provision = path.join(dir, 'infra', 'provision');
  const script = readFileSync(provision, 'utf8').replace('set -eu\n', `set -eu\ntouch '${ran}'\n`);
  writeFileSync(provision, script, { mode: 0o755 });
  return { dir, ran };
}

describe('a saved plan cannot be pointed at another directory', () => {
  it('apply refuses a saved plan whose topology.file was edited, and runs nothing from there', async () => {
    const repo = await initRepo();
    const stateDir = trackStateDir(path.join(path.dirname(repo.dir), 'state'));
    const cli = (...args: string[]) => runCli(args, { cwd: repo.dir, env: { CUTOVER_STATE_DIR: stateDir } });
    expect((await cli('topology', 'plan', '--out', 'plan.json')).code).toBe(0);
    const other = lookalike(repo);
    const saved = JSON.parse(repo.read('plan.json')) as SavedPlan;
    const edited = { ...saved, topology: { ...saved.topology, file: path.join(other.dir, 'topology.yaml') } };
    repo.write(`${JSON.stringify(edited, null, 2)}\n`, 'plan.json');

    const applied = await cli('topology', 'apply', 'plan.json', '--yes');
    expect(applied.code).toBe(1);
    expect(applied.stderr).toMatch(
      /^cutover: plan\.json is not a saved plan: topology\.file, plannedAgainst, commit or createdAt was edited after the plan was saved/,
    );
    expect(existsSync(other.ran)).toBe(false);
    // And the commit it says it came from is covered the same way.
    const recommitted = { ...saved, commit: 'f'.repeat(40) };
    repo.write(`${JSON.stringify(recommitted, null, 2)}\n`, 'plan.json');
    const again = await cli('topology', 'apply', 'plan.json', '--yes');
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('was edited after the plan was saved');
  });

  it('the server refuses a saved plan or a request whose topology lies outside --workdir, resealed or not', async () => {
    const repo = await initRepo();
    // The server's --workdir is the repository (startServer: the state directory's parent).
    const { url } = await startServer(path.join(repo.dir, '.server-state'));
    const post = async (route: string, body: unknown) => {
      const response = await fetch(`${url}${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const planned = await post('/v1/plan', { topology: repo.read(), path: 'topology.yaml', saved: true });
    expect(planned.status).toBe(200);
    const saved = planned.body as unknown as SavedPlan;
    const other = lookalike(repo);
    for (const file of [path.join(other.dir, 'topology.yaml'), '../elsewhere/topology.yaml']) {
      const moved = { ...saved, topology: { ...saved.topology, file } };
      const resealed = { ...moved, seal: savedPlanSealOf(moved) };
      const refused = await post('/v1/apply', { plan: resealed });
      expect(refused.status, JSON.stringify(refused.body)).toBe(400);
      expect(refused.body.detail).toBe(
        `plan.topology.file ${JSON.stringify(file)} lies outside the server's --workdir, where every topology's relative paths must resolve; give a path inside it (relative, without ..)`,
      );
      const direct = await post('/v1/apply', { topology: repo.read(), path: file });
      expect(direct.status).toBe(400);
      expect(direct.body.detail).toMatch(/^path .* lies outside the server's --workdir/);
    }
    expect(existsSync(other.ran)).toBe(false);
    // The saved plan as it was still applies.
    const applied = await post('/v1/apply', { plan: saved });
    expect(applied.status, JSON.stringify(applied.body)).toBe(202);
  });

  it('records the commit planned (from the saved plan) and the commit applied (the merge on main)', async () => {
    const repo = await initRepo();
    const stateDir = trackStateDir(path.join(path.dirname(repo.dir), 'state'));
    const cli = (...args: string[]) => runCli(args, { cwd: repo.dir, env: { CUTOVER_STATE_DIR: stateDir } });
    await repo.git('checkout', '-q', '-b', 'change');
    repo.setVersion('api', '2');
    const planned = (await repo.commit('api 2')).sha;
    // Outside the work tree, so that the merge does not carry it.
    const planFile = path.join(path.dirname(repo.dir), 'plan.json');
    expect((await cli('topology', 'plan', '--out', planFile)).code).toBe(0);
    expect((JSON.parse(readFileSync(planFile, 'utf8')) as SavedPlan).commit).toBe(planned);
    await repo.git('checkout', '-q', 'main');
    await repo.git('merge', '-q', '--no-ff', '-m', 'merge api 2', 'change');
    const merged = await repo.head();
    expect(merged).not.toBe(planned);

    const applied = await cli('topology', 'apply', planFile, '--yes', '--json');
    expect(applied.code, applied.stderr).toBe(0);
    const { summary } = JSON.parse(applied.stdout);
    expect(summary).toMatchObject({ commit: planned, commitFrom: 'saved_plan', appliedCommit: merged });
    const shown = await cli('topology', 'migration', 'show', summary.id);
    expect(shown.stdout).toContain(`commit:    ${planned} (planned: from the saved plan)`);
    expect(shown.stdout).toContain(`applied:   ${merged} (HEAD of the checkout applied from)`);
  });

  it('migrate run in-process from the work tree records its HEAD as the commit applied', async () => {
    const repo = await initRepo();
    const stateDir = trackStateDir(path.join(path.dirname(repo.dir), 'state'));
    // The command's directory is the work tree, the process's is not: the relative topology.yaml
    // is the work tree's (read there and looked up in Git there).
    expect(path.resolve(repo.dir)).not.toBe(process.cwd());
    const migrated = await runCli(['topology', 'migrate', '--yes', '--json'], {
      cwd: repo.dir,
      env: { CUTOVER_STATE_DIR: stateDir },
    });
    expect(migrated.code, migrated.stderr).toBe(0);
    const { summary } = JSON.parse(migrated.stdout);
    expect(summary).toMatchObject({ appliedCommit: await repo.head() });
  });
});
