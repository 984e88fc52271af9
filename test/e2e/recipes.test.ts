/**
 * The CI recipes end to end (examples/ci/github/, examples/ci/gitlab/.gitlab-ci.yml), the round trip
 * of issue 19: a pull (merge) request's push is planned against the live layout of a real
 * `cutover server` into ONE comment (note) that a second push updates; the merge applies exactly
 * that saved plan and posts the outcome; a plan made stale by another merge is refused, and its
 * outcome says why. The recipes' steps run by bash exactly as written, with the CI's variables, on
 * a real Git repository (a bare remote, a developer's clone, the runner's checkouts); cutover is
 * installed by the recipes' own install step from `npm pack` of this working tree, once: the
 * GitHub workflows' step, into the npm prefix every job of both hosts uses. GitLab's before_script
 * runs the same npm command (a test compares the two scripts, and runs both with CUTOVER_PACKAGE
 * unset); installing again for it (~25 CPU-seconds) would run that command again on the same
 * tarball. The code host's API is the only thing replaced, at the HTTP boundary
 * (test/support/code-host.ts).
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lowestNodeVersion } from '../../scripts/tools.mjs';
import {
  bash,
  gitlabMergeRequest,
  gitlabPush,
  gitlabRulesMatch,
  installedPackage,
  type JobResult,
  loadWorkflow,
  packWorkingTree,
  registryAccess,
  resolvedJob,
  runGitHubJob,
  runGitLabJob,
  runnerEnv,
  setVersion,
  transcript,
  unlockedPackages,
} from '../support/ci-recipe.js';
import { repoRoot, runCli } from '../support/cli.js';
import { CodeHost, githubActionsBot, type HostComment, type HostKind } from '../support/code-host.js';
import { git } from '../support/git.js';
import { Api, ServerHarness } from '../support/server.js';

const githubPlan = 'examples/ci/github/cutover-plan.yml';
const githubApply = 'examples/ci/github/cutover-apply.yml';
const gitlabFile = 'examples/ci/gitlab/.gitlab-ci.yml';
const topology = 'envs/shop/topology.yaml';
const cutoverToken = 'ci-token-5f0e2d1c4b3a29187766';
const hostToken = 'host-token-0a1b2c3d4e5f60718293';
const reviewer = { id: 7, login: 'reviewer' };
const gitlabBot = { id: 301, login: 'project_42_bot' };
/** Packing, the install (the dependencies' manifests from the registry), a server and a baseline migration. */
const setupTimeoutMs = 360_000;
const scenarioTimeoutMs = 180_000;

const harness = new ServerHarness();
let tarball = '';
/** Where the install step put cutover, for every job of both hosts (a runner's npm prefix). */
let npmPrefix = '';
/**
 * Each host's world, made while the install step runs (it needs no installed cutover: its server
 * and baseline migration run from this checkout); each host's suite waits for its own.
 */
const worlds: Partial<Record<HostKind, Promise<World>>> = {};
/** The files beside the checkout before packing it (steps run there must leave nothing behind). */
const besideCheckout = (): string[] =>
  readdirSync(path.dirname(repoRoot)).filter((name) => {
    try {
      return statSync(path.join(path.dirname(repoRoot), name)).isFile();
    } catch {
      return false; // removed since listed
    }
  });
let besideBefore: string[] = [];

beforeAll(async () => {
  for (const kind of ['github', 'gitlab'] as const) {
    const made = World.create(kind);
    made.catch(() => undefined); // awaited (and reported) by the host's own suite
    worlds[kind] = made;
  }
  const dir = await harness.tempDir('cutover-recipes-');
  besideBefore = besideCheckout();
  tarball = await packWorkingTree(dir);
  npmPrefix = path.join(dir, 'npm');
  // The install step as written, once per test file.
  const started = performance.now();
  const job = await runGitHubJob({
    workflow: githubApply,
    job: 'apply',
    workspace: path.join(dir, 'install', 'ws'),
    event: {},
    variables: {},
    expressions: {
      'vars.CUTOVER_PACKAGE': tarball,
      'secrets.CUTOVER_SERVER': '',
      'secrets.CUTOVER_TOKEN': '',
      'secrets.GITHUB_TOKEN': '',
    },
    npmPrefix,
    remote: '',
    // The install alone: no repository to check out yet.
    only: ['actions/setup-node@v4', 'Install cutover'],
  });
  const installMs = Math.round(performance.now() - started);
  // The transcript in the log whatever vitest does with a failed hook's message.
  if (job.code !== 0) console.error(`the recipes' install step failed:\n${transcript(job)}`);
  expect(job.code, transcript(job)).toBe(0);
  expect(job.steps.map((s) => s.stdout).join('')).toMatch(/^0\.1\.0$/m); // cutover --version
  const size = (statSync(tarball).size / 1e6).toFixed(1);
  console.info(`the recipes' install step (npm pack tarball, ${size} MB): ${installMs} ms`);
}, setupTimeoutMs);

afterAll(() => harness.cleanup());

describe('the recipes install cutover the same way in every job', () => {
  it('leaves no file beside the checkout when it runs a step there (the pack)', () => {
    // Each step's script was written to a file in the directory above its working directory: for
    // the pack, the checkout's parent, which kept one per run.
    expect(besideCheckout().filter((name) => !besideBefore.includes(name))).toEqual([]);
  });

  it("runs the jobs with the machine's access to the npm registry, as a runner has it (the install resolves manifests there)", () => {
    const env = runnerEnv('/prefix');
    const present = registryAccess.filter((name) => process.env[name] !== undefined);
    expect(Object.fromEntries(present.map((name) => [name, env[name]]))).toEqual(
      Object.fromEntries(present.map((name) => [name, process.env[name]])),
    );
    expect(Object.keys(env).filter((name) => name.startsWith('CUTOVER_'))).toEqual([]);
  });

  it(`installs on the lowest Node the package claims (engine-strict), with the locked versions of what the tarball carries, and plans an example`, async () => {
    const installed = installedPackage(npmPrefix);
    const env = runnerEnv(npmPrefix);
    const example = 'examples/changes/version-bump';
    const run = await bash(
      `node --version; npm version --json; npm config get engine-strict; cutover topology plan -f ${example}/after.yaml --against ${example}/before.yaml`,
      installed,
      env,
      'npm and a plan',
    );
    expect(run.code, run.stderr).toBe(0);
    // The PATH's node (cutover's bin runs it) and npm's are the lowest Node; engine-strict is on.
    const node = lowestNodeVersion();
    expect(run.stdout).toMatch(new RegExp(`^v${node}\n[^]*"node": "${node}"[^]*\ntrue\n`));
    expect(unlockedPackages(installed)).toEqual([]);
    expect(run.stdout).toContain('Plan: 0 to add, 2 to change, 0 to remove; 9 actions.');
  });

  it("carries every dependency but Temporal's in the tarball (bundleDependencies) and pins Temporal's exactly", () => {
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));
    const temporal = Object.keys(pkg.dependencies).filter((name) => name.startsWith('@temporalio/'));
    expect(pkg.bundleDependencies).toEqual(
      Object.keys(pkg.dependencies).filter((name) => !temporal.includes(name)),
    );
    for (const name of temporal) expect(pkg.dependencies[name]).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('runs one install step in every job of both hosts, from CUTOVER_PACKAGE, never the registry name', () => {
    const install = (file: string, job: string) =>
      loadWorkflow(file).jobs[job]?.steps.find((s) => s.name === 'Install cutover')?.run;
    const github = install(githubPlan, 'plan');
    expect(github).toBe(install(githubApply, 'apply'));
    const gitlab = ['cutover-plan', 'cutover-apply'].map((job) =>
      resolvedJob(gitlabFile, job).before_script?.join('\n'),
    );
    expect(gitlab[1]).toBe(gitlab[0]);
    for (const text of [github, gitlab[0]]) {
      expect(text).toContain('npm install --global --no-audit --no-fund "$CUTOVER_PACKAGE"');
      expect(text).not.toMatch(/npm install[^\n]* cutover(\s|$)/);
    }
    // The same script but for the line that says CUTOVER_PACKAGE is missing: the install this file
    // runs once (GitHub's) is GitLab's too.
    const withoutMessage = (text = '') => text.replace(/^ *echo .*CUTOVER_PACKAGE is not set.*$/m, '');
    expect(withoutMessage(gitlab[0])).toBe(withoutMessage(github));
  });

  it('stops each install step before npm, saying what to set, when CUTOVER_PACKAGE is not set', async () => {
    const dir = await harness.tempDir('cutover-recipes-unset-');
    const prefix = path.join(dir, 'npm');
    const [github, gitlab] = await Promise.all([
      runGitHubJob({
        workflow: githubPlan,
        job: 'plan',
        workspace: path.join(dir, 'github', 'ws'),
        event: {},
        variables: {},
        expressions: {
          'vars.CUTOVER_PACKAGE': '',
          'secrets.CUTOVER_SERVER': '',
          'secrets.CUTOVER_TOKEN': '',
          'secrets.GITHUB_TOKEN': '',
        },
        npmPrefix: prefix,
        remote: '',
        only: ['Install cutover'],
      }),
      runGitLabJob({
        file: gitlabFile,
        job: 'cutover-apply',
        workspace: path.join(dir, 'gitlab', 'ws'),
        variables: { ...gitlabPush('0'.repeat(40)), GIT_STRATEGY: 'none' },
        npmPrefix: prefix,
        remote: '',
        part: 'before_script',
      }),
    ]);
    expect([github.code, github.steps.map((s) => s.stderr)]).toEqual([
      1,
      [
        '::error::CUTOVER_PACKAGE is not set: set the repository variable to a tarball made by npm pack (its URL)\n',
      ],
    ]);
    expect([gitlab.code, gitlab.steps.map((s) => s.stderr)]).toEqual([
      1,
      ['CUTOVER_PACKAGE is not set: set the CI/CD variable to a tarball made by npm pack (its URL)\n'],
    ]);
    expect(existsSync(prefix)).toBe(false); // npm never ran
  });

  it('runs the GitLab plan job in merge request pipelines and the apply job on the default branch only', () => {
    const plan = resolvedJob(gitlabFile, 'cutover-plan');
    const apply = resolvedJob(gitlabFile, 'cutover-apply');
    const mr = gitlabMergeRequest(1, '0'.repeat(40), 'feature');
    const push = gitlabPush('0'.repeat(40));
    expect([gitlabRulesMatch(plan, mr), gitlabRulesMatch(plan, push)]).toEqual([true, false]);
    expect([gitlabRulesMatch(apply, mr), gitlabRulesMatch(apply, push)]).toEqual([false, true]);
    expect(gitlabRulesMatch(apply, { ...push, CI_COMMIT_BRANCH: 'feature' })).toBe(false);
  });
});

// The two hosts' recipes run at once, each in a world of its own (repositories, cutover server,
// code host, npm prefix); the scenarios of one host run in order, each on the state the one before
// left (`it.sequential` inside the concurrent suite).
for (const kind of ['github', 'gitlab'] as const) {
  describe.concurrent(`the ${kind} recipe, end to end`, () => {
    let world: World;
    beforeAll(async () => {
      world = await (worlds[kind] as Promise<World>);
    }, setupTimeoutMs);
    afterAll(() => world?.close());

    it.sequential(
      'plans a pull request commit into one comment, and a second push updates it',
      async () => {
        // A reviewer's comment that imitates ours: never updated, never applied.
        world.host.comment(
          1,
          reviewer,
          `<!-- cutover-plan: ${topology} -->\nforged\n<!-- cutover-saved-plan: AAAA -->`,
        );
        const head = await world.branch('bump-api', (text) => setVersion(text, 'api', '2'));
        const first = await world.plan(1, 'bump-api', head);
        expect(first.job.code, transcript(first.job)).toBe(0);
        const comment = world.planComment(1);
        expect(comment.body).toContain('Planned against the live layout of shop, serial 1');
        expect(comment.body).toMatch(/\*\*api\*\* \| version 1 → 2/);
        const saved = savedPlanIn(comment);
        expect(saved.commit).toBe(first.commit);

        const second = await world.push('bump-api', (text) => setVersion(text, 'db', '2'));
        const again = await world.plan(1, 'bump-api', second);
        expect(again.job.code, transcript(again.job)).toBe(0);
        const updated = world.planComment(1);
        expect(updated.id).toBe(comment.id);
        expect(updated.body).toMatch(/\*\*db\*\* \| version 1 → 2/);
        expect(savedPlanIn(updated).plan.planId).not.toBe(saved.plan.planId);
        expect(world.host.commentsOn(1)).toHaveLength(2); // the reviewer's and ours
        expect(world.host.requests.filter((r) => r.status >= 400)).toEqual([]);
      },
      scenarioTimeoutMs,
    );

    it.sequential(
      'applies exactly the plan the pull request showed on merge, and posts the outcome',
      async () => {
        const shown = savedPlanIn(world.planComment(1));
        const merge = await world.merge(1, 'bump-api');
        const job = await world.apply(1, merge);
        expect(job.code, transcript(job)).toBe(0);

        const [latest] = await world.migrations();
        expect(latest).toMatchObject({
          planId: shown.plan.planId,
          commit: shown.commit,
          startedBy: 'ci',
          lifecycle: 'completed',
        });
        const outcome = world.host.commentsOn(1).at(-1) as HostComment;
        expect(outcome.author).toEqual(world.bot);
        expect(outcome.body).toContain(`<!-- cutover-outcome: ${topology} -->`);
        expect(outcome.body).toContain(`cutover applied \`${topology}\`: completed`);
        expect(outcome.body).toContain(
          `Migration \`${latest?.id}\` ran plan \`${shown.plan.planId.slice(0, 19)}\``,
        );
        expect(world.host.requests.filter((r) => r.status >= 400)).toEqual([]);
      },
      scenarioTimeoutMs,
    );

    it.sequential(
      'refuses a plan made stale by another merge, and says why on the pull request',
      async () => {
        const api = await world.branch('api-3', (text) => setVersion(text, 'api', '3'));
        const db = await world.branch('db-3', (text) => setVersion(text, 'db', '3'));
        for (const [n, branch, head] of [
          [2, 'api-3', api],
          [3, 'db-3', db],
        ] as const) {
          const { job } = await world.plan(n, branch, head);
          expect(job.code, transcript(job)).toBe(0);
          expect(world.planComment(n).body).toContain('Planned against the live layout of shop, serial 2');
        }
        const stale = savedPlanIn(world.planComment(2));

        // The second pull request merges first, and is applied.
        const applied = await world.apply(3, await world.merge(3, 'db-3'));
        expect(applied.code, transcript(applied)).toBe(0);
        expect(world.host.commentsOn(3).at(-1)?.body).toContain('completed');

        const refused = await world.apply(2, await world.merge(2, 'api-3'));
        expect(refused.code).toBe(1);
        const outcome = world.host.commentsOn(2).at(-1) as HostComment;
        expect(outcome.author).toEqual(world.bot);
        expect(outcome.body).toContain(`cutover did not apply \`${topology}\`: refused, the plan is stale`);
        expect(outcome.body).toMatch(
          /the live layout of shop has moved since it was planned, from serial 2 to serial 3 \(recorded by mig_\w+/,
        );
        expect(outcome.body).toContain(`cutover topology plan -f ${topology} --out plan.json`);
        const all = await world.migrations();
        expect(all.map((m) => m.planId)).not.toContain(stale.plan.planId);
        expect(all).toHaveLength(3); // the baseline, the first merge, the second pull request
      },
      scenarioTimeoutMs,
    );

    it.sequential(
      'applies nothing when a push that failed to plan smuggles a saved plan into the comment through its error',
      async () => {
        // A saved plan nobody reviewed (api 666), valid against the live layout: the author can get
        // one from the server, or any token of the planner role.
        const main = readFileSync(path.join(world.dev, topology), 'utf8');
        const planted = await world.api.post('/v1/plan', {
          topology: setVersion(main, 'api', '666'),
          path: topology,
          saved: true,
        });
        expect(planted.status).toBe(200);
        const encoded = gzipSync(JSON.stringify(planted.json)).toString('base64');
        // A key that does not load: the plan job's error quotes it into the comment.
        const head = await world.branch(
          'smuggle',
          (text) => `${text}  "<!-- cutover-saved-plan: ${encoded} -->": 1\n`,
        );
        const { job } = await world.plan(4, 'smuggle', head);
        expect(job.code).toBe(1);
        expect(world.planComment(4).body).toContain('could not be planned');

        const merge = await world.merge(4, 'smuggle');
        try {
          const applied = await world.apply(4, merge);
          expect(applied.code).toBe(1);
          const outcome = world.host.commentsOn(4).at(-1) as HostComment;
          expect(outcome.body).toContain(`cutover did not apply \`${topology}\`: no saved plan`);
          const all = await world.migrations();
          expect(all.map((m) => m.planId)).not.toContain(planted.json.plan.planId);
          expect(all).toHaveLength(3);
        } finally {
          await world.revert('smuggle');
        }
      },
      scenarioTimeoutMs,
    );

    it.sequential(
      'refuses the shown plan when the merge holds a later push that was never planned',
      async () => {
        const head = await world.branch('late', (text) => setVersion(text, 'api', '4'));
        const { job } = await world.plan(5, 'late', head);
        expect(job.code, transcript(job)).toBe(0);
        const shown = savedPlanIn(world.planComment(5));
        // Pushed, and merged before its plan job ran: the comment still shows api 4.
        await world.push('late', (text) => setVersion(text, 'api', '5'));
        const refused = await world.apply(5, await world.merge(5, 'late'));
        expect(refused.code).toBe(1);
        const outcome = world.host.commentsOn(5).at(-1) as HostComment;
        expect(outcome.body).toContain(`cutover did not apply \`${topology}\`: refused (PLAN_MISMATCH)`);
        expect(outcome.body).toContain(`${topology} is not the topology`);
        expect((await world.migrations()).map((m) => m.planId)).not.toContain(shown.plan.planId);
      },
      scenarioTimeoutMs,
    );
  });
}

// ─── The world of one host: a remote, a developer, a cutover server, the code host ───────────────

interface SavedPlanJson {
  plan: { planId: string };
  commit: string | null;
}

interface Migration {
  id: string;
  planId: string | null;
  commit: string | null;
  startedBy: string | null;
  lifecycle: string;
}

class World {
  private constructor(
    readonly kind: HostKind,
    readonly dir: string,
    readonly remote: string,
    /** The developer's clone. */
    readonly dev: string,
    readonly host: CodeHost,
    readonly server: { url: string },
    readonly api: Api,
  ) {}

  get bot() {
    return this.kind === 'github' ? githubActionsBot : gitlabBot;
  }

  static async create(kind: HostKind): Promise<World> {
    const dir = await harness.tempDir(`cutover-recipe-${kind}-`);
    // The repository: the topology (examples/exec-demo as `shop`) and its scripts.
    const seed = path.join(dir, 'seed');
    mkdirSync(path.join(seed, 'envs/shop'), { recursive: true });
    cpSync(path.join(repoRoot, 'examples/exec-demo/infra'), path.join(seed, 'envs/shop/infra'), {
      recursive: true,
    });
    // The demo's drain pauses a second to show a drain in a terminal: nothing the recipes look at,
    // and each applied migration would wait it out.
    const drain = path.join(seed, 'envs/shop/infra/drain');
    const paused = readFileSync(drain, 'utf8');
    if (!paused.includes('\nsleep 1\n')) throw new Error(`${drain} changed: no pause to take out`);
    writeFileSync(drain, paused.replace('\nsleep 1\n', '\n'));
    const demo = readFileSync(path.join(repoRoot, 'examples/exec-demo/topology.yaml'), 'utf8');
    writeFileSync(path.join(seed, topology), demo.replace(/^ {2}name: exec-demo$/m, '  name: shop'));
    await git(dir, 'init', '-q', '-b', 'main', seed);
    await git(seed, 'add', '-A');
    await git(seed, 'commit', '-qm', 'shop');
    const remote = path.join(dir, 'remote.git');
    await git(dir, 'clone', '-q', '--bare', seed, remote);
    const dev = path.join(dir, 'dev');
    await git(dir, 'clone', '-q', remote, dev);

    // The cutover server's machine holds a checkout (its scripts); one token, for CI.
    const workdir = path.join(dir, 'server-checkout');
    await git(dir, 'clone', '-q', remote, workdir);
    const server = await harness.start({
      stateDir: path.join(dir, 'state'),
      workdir,
      env: { CUTOVER_TOKENS: `ci:operator:${cutoverToken}` },
    });
    const baseline = await runCli(['topology', 'migrate', '-f', topology, '--yes', '--json'], {
      cwd: workdir,
      env: { CUTOVER_SERVER: server.url, CUTOVER_TOKEN: cutoverToken },
    });
    if (baseline.code !== 0) throw new Error(`the baseline migration failed: ${baseline.stderr}`);
    const project = kind === 'github' ? 'acme/shop' : '42';
    const bot = kind === 'github' ? githubActionsBot : gitlabBot;
    const host = await CodeHost.start(kind, project, {
      [hostToken]: bot,
      'reviewer-token-00000000': reviewer,
    });
    return new World(kind, dir, remote, dev, host, server, await Api.connect(server.url, cutoverToken));
  }

  async close(): Promise<void> {
    await this.host.close();
  }

  /** A new branch off main with one edit of the topology, pushed; its head. */
  async branch(name: string, edit: (text: string) => string): Promise<string> {
    await git(this.dev, 'fetch', '-q', 'origin');
    await git(this.dev, 'checkout', '-q', '-B', name, 'origin/main');
    return this.push(name, edit);
  }

  /** Another commit on the branch, pushed; its head. */
  async push(name: string, edit: (text: string) => string): Promise<string> {
    await git(this.dev, 'checkout', '-q', name);
    const file = path.join(this.dev, topology);
    writeFileSync(file, edit(readFileSync(file, 'utf8')));
    await git(this.dev, 'commit', '-qam', `${name}: edit`);
    await git(this.dev, 'push', '-q', '-f', 'origin', name);
    return git(this.dev, 'rev-parse', 'HEAD');
  }

  /** The merge of the request into main, pushed (a merge commit, as the hosts' merge button). */
  async merge(request: number, name: string): Promise<string> {
    await git(this.dev, 'fetch', '-q', 'origin');
    await git(this.dev, 'checkout', '-q', '-B', 'main', 'origin/main');
    await git(this.dev, 'merge', '-q', '--no-ff', '-m', `Merge request #${request} from ${name}`, name);
    await git(this.dev, 'push', '-q', 'origin', 'main');
    const sha = await git(this.dev, 'rev-parse', 'HEAD');
    this.host.merged(sha, request);
    return sha;
  }

  /** Reverts main to its state before the last merge (a broken topology must not stay on main). */
  async revert(name: string): Promise<void> {
    await git(this.dev, 'checkout', '-q', 'main');
    await git(this.dev, 'revert', '--no-edit', '-m', '1', 'HEAD');
    await git(this.dev, 'push', '-q', 'origin', 'main');
    await git(this.dev, 'branch', '-q', '-D', name);
  }

  /** The plan job of the request's pipeline; the commit it checked out. */
  async plan(request: number, branch: string, head: string): Promise<{ job: JobResult; commit: string }> {
    const workspace = path.join(await harness.tempDir('cutover-job-'), 'ws');
    if (this.kind === 'gitlab') {
      const job = await runGitLabJob({
        file: gitlabFile,
        job: 'cutover-plan',
        workspace,
        variables: { ...gitlabMergeRequest(request, head, branch), ...this.gitlabSecrets() },
        npmPrefix,
        remote: this.remote,
        part: 'script',
      });
      return { job, commit: head };
    }
    // GitHub checks out refs/pull/N/merge: the request merged into its base, made by the host.
    const merge = await this.githubMergeRef(request, head);
    const job = await runGitHubJob({
      workflow: githubPlan,
      job: 'plan',
      workspace,
      event: {
        number: request,
        pull_request: { number: request, head: { sha: head, ref: branch }, base: { ref: 'main' } },
      },
      variables: this.githubVariables('pull_request', merge, `refs/pull/${request}/merge`),
      expressions: this.githubExpressions(),
      npmPrefix,
      remote: this.remote,
      skip: ['Install cutover'],
    });
    return { job, commit: merge };
  }

  /** The job on the default branch after the merge. */
  async apply(_request: number, merge: string): Promise<JobResult> {
    const workspace = path.join(await harness.tempDir('cutover-job-'), 'ws');
    if (this.kind === 'gitlab') {
      return runGitLabJob({
        file: gitlabFile,
        job: 'cutover-apply',
        workspace,
        variables: { ...gitlabPush(merge), ...this.gitlabSecrets() },
        npmPrefix,
        remote: this.remote,
        part: 'script',
      });
    }
    return runGitHubJob({
      workflow: githubApply,
      job: 'apply',
      workspace,
      event: { ref: 'refs/heads/main', after: merge },
      variables: this.githubVariables('push', merge, 'refs/heads/main'),
      expressions: this.githubExpressions(),
      npmPrefix,
      remote: this.remote,
      skip: ['Install cutover'],
    });
  }

  /** Our plan comment on the request: exactly one. */
  planComment(request: number): HostComment {
    const ours = this.host
      .commentsOn(request)
      .filter((c) => c.author.id === this.bot.id && c.body.startsWith(`<!-- cutover-plan: ${topology} -->`));
    expect(ours).toHaveLength(1);
    return ours[0] as HostComment;
  }

  /** The server's migrations of shop, newest first. */
  async migrations(): Promise<Migration[]> {
    const r = await this.api.get('/v1/migrations?environment=shop&limit=100');
    expect(r.status).toBe(200);
    return r.json.items as Migration[];
  }

  private async githubMergeRef(request: number, head: string): Promise<string> {
    const scratch = path.join(await harness.tempDir('cutover-merge-ref-'), 'clone');
    await git(this.dir, 'clone', '-q', this.remote, scratch);
    await git(scratch, 'merge', '-q', '--no-ff', '-m', `Merge ${head} into main`, head);
    await git(scratch, 'push', '-q', '-f', 'origin', `HEAD:refs/pull/${request}/merge`);
    return git(scratch, 'rev-parse', 'HEAD');
  }

  private githubVariables(event: string, sha: string, ref: string): Record<string, string> {
    return {
      GITHUB_API_URL: this.host.apiUrl,
      GITHUB_REPOSITORY: this.host.project,
      GITHUB_EVENT_NAME: event,
      GITHUB_SHA: sha,
      GITHUB_REF: ref,
      GITHUB_RUN_ID: '1',
    };
  }

  private githubExpressions(): Record<string, string> {
    return {
      'vars.CUTOVER_PACKAGE': tarball,
      'secrets.CUTOVER_SERVER': this.server.url,
      'secrets.CUTOVER_TOKEN': cutoverToken,
      'secrets.GITHUB_TOKEN': hostToken,
    };
  }

  private gitlabSecrets(): Record<string, string> {
    return {
      CI_API_V4_URL: this.host.apiUrl,
      CI_PROJECT_ID: this.host.project,
      CI_JOB_ID: '1',
      CUTOVER_PACKAGE: tarball,
      CUTOVER_SERVER: this.server.url,
      CUTOVER_TOKEN: cutoverToken,
      GITLAB_TOKEN: hostToken,
    };
  }
}

// ─── Helpers ────────────────────────────────────────────────────────────────────────────────────

/** The saved plan hidden in a plan comment (gzip, base64), read as the merge job reads it. */
function savedPlanIn(comment: HostComment): SavedPlanJson {
  const encoded = /<!-- cutover-saved-plan: ([A-Za-z0-9+/=]+) -->/.exec(comment.body)?.[1];
  if (!encoded) throw new Error(`no saved plan in the comment:\n${comment.body}`);
  return JSON.parse(gunzipSync(Buffer.from(encoded, 'base64')).toString('utf8')) as SavedPlanJson;
}
