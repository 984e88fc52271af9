/**
 * Runs the CI recipes' jobs (examples/ci/github/*.yml, examples/ci/gitlab/.gitlab-ci.yml) the way
 * the runners do, for test/e2e/recipes.test.ts: every `run:` step (GitHub) or the job's
 * before_script + script (GitLab) is executed by bash exactly as written, in a fresh workspace, with
 * the CI's environment variables. Only what a runner does around the scripts is done here: the
 * `${{ … }}` expressions of `env:` (from a map the test gives; an unknown one fails), `if:` of the
 * forms the recipes use, actions/checkout (a clone at the commit) and actions/setup-node (Node 20
 * is already on the PATH: the lowest Node 20 package.json claims), GitLab's `extends`, `rules: if:`
 * and GIT_STRATEGY.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
import { lowestNodeBin, lowestNodeVersion } from '../../scripts/tools.mjs';
import { repoRoot } from './cli.js';
import { git } from './git.js';

/** How long one CI step may take on a loaded machine (an npm install is the longest). */
const stepTimeoutMs = 240_000;

export interface StepResult {
  name: string;
  code: number;
  stdout: string;
  stderr: string;
}

export interface JobResult {
  /** 0 when every step that ran succeeded. */
  code: number;
  steps: StepResult[];
  workspace: string;
}

/** Every step's exit status and output, for a failed expectation's message. */
export function transcript(job: JobResult): string {
  return job.steps.map((s) => `--- ${s.name} (exit ${s.code})\n${s.stdout}\n${s.stderr}`).join('\n');
}

/**
 * Runs a script with bash (`shell: bash` on GitHub; GitLab's runner shell) in `cwd`, given on the
 * command line: a script file beside the workspace would be left in the directory above it (the
 * repository's parent, for the steps run in the checkout).
 */
export function bash(script: string, cwd: string, env: NodeJS.ProcessEnv, name: string): Promise<StepResult> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      ['--noprofile', '--norc', '-eo', 'pipefail', '-c', script, name],
      { cwd, env, timeout: stepTimeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        // A step killed at its timeout says so (its exit status alone reads as a plain failure).
        const killed = error?.killed ? `\n(${name} was killed after ${stepTimeoutMs / 1000} s)` : '';
        resolve({ name, code, stdout, stderr: `${stderr}${killed}` });
      },
    );
  });
}

/**
 * How this machine reaches the npm registry (its TLS trust: a proxy's CA; its proxy), which a CI
 * runner's environment has too. `npm install --global` of a tarball resolves the dependencies'
 * manifests from the registry (`npm ci` cached only their tarballs): without these it fails
 * (SELF_SIGNED_CERT_IN_CHAIN, retried until the step's timeout) where `npm ci` succeeded.
 */
export const registryAccess: readonly string[] = [
  'NODE_EXTRA_CA_CERTS',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'HTTPS_PROXY',
  'https_proxy',
  'HTTP_PROXY',
  'http_proxy',
  'NO_PROXY',
  'no_proxy',
  'npm_config_cafile',
  'npm_config_registry',
  'npm_config_proxy',
  'npm_config_https_proxy',
];

/**
 * The directory of the lowest Node package.json claims (engines), which scripts/test-deps.mjs
 * installs: the jobs run npm and cutover on it.
 */
export function lowestNode(): string {
  const bin = lowestNodeBin();
  if (!bin) throw new Error(`Node ${lowestNodeVersion()} is not installed: run npm run test:deps`);
  return bin;
}

/**
 * The environment a runner gives a job: nothing of the test's own (no CUTOVER_*), PATH with the
 * npm prefix's bin first (where `npm install --global` puts cutover), then the lowest Node the
 * package claims (`lowestNode`: npm and cutover run on it; npm itself is the machine's, found
 * after it), the prefix for npm with engine-strict on (a dependency that wants a newer Node fails
 * the install, as EBADENGINE, instead of a warning), and the machine's access to the registry
 * (`registryAccess`).
 */
export function runnerEnv(npmPrefix: string): NodeJS.ProcessEnv {
  const access = Object.fromEntries(
    registryAccess.filter((name) => process.env[name] !== undefined).map((name) => [name, process.env[name]]),
  );
  return {
    ...access,
    PATH: `${path.join(npmPrefix, 'bin')}:${lowestNode()}:${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
    HOME: process.env.HOME,
    LANG: 'C.UTF-8',
    CI: 'true',
    // `npm install --global` into the runner's prefix, from npm's warm cache (after `npm ci`).
    npm_config_prefix: npmPrefix,
    npm_config_engine_strict: 'true',
    npm_config_prefer_offline: 'true',
    npm_config_update_notifier: 'false',
  };
}

/** A tarball of the working tree as `npm pack` makes it (dist/ must be built). */
export async function packWorkingTree(into: string): Promise<string> {
  const result = await bash(
    `npm pack --ignore-scripts --silent --pack-destination '${into}'`,
    repoRoot,
    {
      ...process.env,
    },
    'npm pack',
  );
  if (result.code !== 0) throw new Error(`npm pack failed: ${result.stderr}`);
  return path.join(into, result.stdout.trim().split('\n').pop() as string);
}

/** Where `npm install --global` into `npmPrefix` put the cutover package. */
export function installedPackage(npmPrefix: string): string {
  return path.join(npmPrefix, 'lib', 'node_modules', 'cutover');
}

/**
 * The packages installed in `installed`'s node_modules (at any depth) that the tarball carries
 * (`inBundle` in package-lock.json) at a version the lockfile names nowhere, as `name@version`:
 * npm resolved them afresh instead of installing the tree the tests ran with. (A dependency of
 * Temporal's may share a name with one carried, at another locked version: terser's commander 2.)
 */
export function unlockedPackages(installed: string): string[] {
  const lock = JSON.parse(readFileSync(path.join(repoRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string; inBundle?: boolean }>;
  };
  const locked = new Map<string, Set<string>>();
  const carried = new Set<string>();
  for (const [where, entry] of Object.entries(lock.packages)) {
    if (!where || !entry.version) continue;
    const name = where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length);
    locked.set(name, (locked.get(name) ?? new Set()).add(entry.version));
    if (entry.inBundle) carried.add(name);
  }
  const unlocked: string[] = [];
  const walk = (modules: string): void => {
    if (!existsSync(modules)) return;
    for (const entry of readdirSync(modules)) {
      if (entry.startsWith('.')) continue;
      const names = entry.startsWith('@')
        ? readdirSync(path.join(modules, entry)).map((n) => `${entry}/${n}`)
        : [entry];
      for (const name of names) {
        const dir = path.join(modules, name);
        const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string };
        if (carried.has(name) && !locked.get(name)?.has(pkg.version)) unlocked.push(`${name}@${pkg.version}`);
        walk(path.join(dir, 'node_modules'));
      }
    }
  };
  walk(path.join(installed, 'node_modules'));
  return unlocked;
}

/** Replaces `${{ expr }}` by the map's value; an expression the test did not give fails. */
function substitute(value: unknown, expressions: Record<string, string>, where: string): string {
  return String(value).replace(/\$\{\{\s*([^}]+?)\s*\}\}/g, (_all, expr: string) => {
    const found = expressions[expr];
    if (found === undefined) throw new Error(`${where}: no value for the expression \${{ ${expr} }}`);
    return found;
  });
}

// ─── GitHub Actions ─────────────────────────────────────────────────────────────────────────────

interface GitHubStep {
  name?: string;
  id?: string;
  uses?: string;
  run?: string;
  if?: string;
  with?: Record<string, unknown>;
  env?: Record<string, string>;
}

interface GitHubWorkflow {
  on: Record<string, unknown>;
  env?: Record<string, string>;
  defaults?: { run?: { shell?: string } };
  jobs: Record<string, { env?: Record<string, string>; steps: GitHubStep[] }>;
}

export function loadWorkflow(file: string): GitHubWorkflow {
  return yaml.load(readFileSync(path.join(repoRoot, file), 'utf8')) as GitHubWorkflow;
}

export interface GitHubRun {
  workflow: string;
  job: string;
  workspace: string;
  /** The event payload (GITHUB_EVENT_PATH). */
  event: unknown;
  /** GITHUB_* variables: GITHUB_SHA, GITHUB_EVENT_NAME, GITHUB_API_URL, GITHUB_REPOSITORY… */
  variables: Record<string, string>;
  /** `vars.*`, `secrets.*` values. */
  expressions: Record<string, string>;
  npmPrefix: string;
  /** The clone URL for actions/checkout. */
  remote: string;
  /** Only these steps, by name (an action's name is its `uses:` unless it has one); default all. */
  only?: string[];
  /** Steps already run once for this test file (the install), by name: not run again. */
  skip?: string[];
}

/** `if:` as the recipes write it: `steps.<id>.outputs.<name> (==|!=) '<text>'`. */
function githubCondition(
  expr: string | undefined,
  outputs: Map<string, Record<string, string>>,
  failed: boolean,
) {
  if (expr === undefined) return !failed;
  const m = /^steps\.([\w-]+)\.outputs\.([\w-]+) (==|!=) '([^']*)'$/.exec(expr.trim());
  if (!m) throw new Error(`if: ${expr}: not a condition this runner knows`);
  const value = outputs.get(m[1] as string)?.[m[2] as string] ?? '';
  return !failed && (m[3] === '==' ? value === m[4] : value !== m[4]);
}

export async function runGitHubJob(run: GitHubRun): Promise<JobResult> {
  const workflow = loadWorkflow(run.workflow);
  if (workflow.defaults?.run?.shell !== 'bash')
    throw new Error(`${run.workflow}: run steps must use shell: bash`);
  const job = workflow.jobs[run.job];
  if (!job) throw new Error(`${run.workflow}: no job ${run.job}`);
  mkdirSync(run.workspace, { recursive: true });
  const eventPath = path.join(run.workspace, '..', 'event.json');
  writeFileSync(eventPath, JSON.stringify(run.event));
  const outputs = new Map<string, Record<string, string>>();
  const steps: StepResult[] = [];
  let failed = false;
  for (const [index, step] of job.steps.entries()) {
    const name = step.name ?? step.uses ?? `step ${index + 1}`;
    if (!githubCondition(step.if, outputs, failed)) continue;
    if (run.only !== undefined && !run.only.includes(name)) continue;
    if (step.uses !== undefined) {
      await runAction(step, run);
      continue;
    }
    if (run.skip?.includes(name)) continue;
    const env: NodeJS.ProcessEnv = { ...runnerEnv(run.npmPrefix), ...run.variables };
    for (const [key, value] of Object.entries({ ...workflow.env, ...job.env, ...step.env })) {
      env[key] = substitute(value, run.expressions, `${run.workflow} env.${key}`);
    }
    const outputFile = path.join(run.workspace, '..', `output-${index}`);
    writeFileSync(outputFile, '');
    Object.assign(env, {
      GITHUB_EVENT_PATH: eventPath,
      GITHUB_OUTPUT: outputFile,
      GITHUB_WORKSPACE: run.workspace,
      GITHUB_ACTIONS: 'true',
      RUNNER_TEMP: path.join(run.workspace, '..'),
    });
    const result = await bash(String(step.run), run.workspace, env, name);
    steps.push(result);
    const written = Object.fromEntries(
      readFileSync(outputFile, 'utf8')
        .split('\n')
        .filter((line) => line.includes('='))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
    if (step.id) outputs.set(step.id, written);
    if (result.code !== 0) failed = true;
  }
  return { code: failed ? 1 : 0, steps, workspace: run.workspace };
}

/** The two actions the recipes use, done as they would be. */
async function runAction(step: GitHubStep, run: GitHubRun): Promise<void> {
  const action = String(step.uses);
  if (action === 'actions/setup-node@v4') {
    if (String(step.with?.['node-version']) !== '20') throw new Error(`${action}: node-version 20 expected`);
    if (!lowestNodeVersion().startsWith('20.'))
      throw new Error(`Node 20 expected, the jobs run ${lowestNodeVersion()}`);
    return;
  }
  if (action === 'actions/checkout@v4') {
    await checkout(run.remote, run.variables.GITHUB_SHA as string, run.workspace);
    return;
  }
  throw new Error(`${run.workflow}: an action this runner does not know: ${action}`);
}

/** A clone of `remote` at `sha` (detached), in `dir`. */
async function checkout(remote: string, sha: string, dir: string): Promise<void> {
  await git(path.dirname(dir), 'clone', '-q', remote, dir);
  await git(dir, 'fetch', '-q', 'origin', '+refs/pull/*:refs/remotes/pull/*');
  await git(dir, 'checkout', '-q', '--detach', sha);
}

// ─── GitLab CI ──────────────────────────────────────────────────────────────────────────────────

interface GitLabJob {
  extends?: string;
  image?: string;
  stage?: string;
  variables?: Record<string, string>;
  rules?: { if?: string; changes?: string[] }[];
  before_script?: string[];
  script?: string[];
}

export function loadGitLab(file: string): {
  variables: Record<string, string>;
  jobs: Record<string, GitLabJob>;
} {
  const doc = yaml.load(readFileSync(path.join(repoRoot, file), 'utf8')) as Record<string, unknown>;
  const { variables, stages: _stages, ...jobs } = doc;
  return { variables: (variables ?? {}) as Record<string, string>, jobs: jobs as Record<string, GitLabJob> };
}

/** A job with its `extends` (one hidden job) folded in, as GitLab merges them. */
export function resolvedJob(file: string, name: string): GitLabJob {
  const { jobs } = loadGitLab(file);
  const job = jobs[name];
  if (!job) throw new Error(`${file}: no job ${name}`);
  const base = job.extends ? jobs[job.extends] : {};
  if (!base) throw new Error(`${file}: ${name} extends ${job.extends}, which is not there`);
  return { ...base, ...job, variables: { ...base.variables, ...job.variables } };
}

/**
 * Whether a job's rules let it run: `if:` expressions of the forms the recipe uses (`$A == "x"`,
 * `$A == $B`, joined by `&&`). `changes:` is not evaluated (every test pipeline changes the file).
 */
export function gitlabRulesMatch(job: GitLabJob, variables: Record<string, string>): boolean {
  const value = (token: string) =>
    token.startsWith('$') ? (variables[token.slice(1)] ?? '') : /^"(.*)"$/.exec(token)?.[1];
  return (job.rules ?? []).some((rule) =>
    (rule.if ?? '').split('&&').every((clause) => {
      const m = /^\s*(\S+)\s*==\s*(\S+)\s*$/.exec(clause);
      if (!m) throw new Error(`rules: if: ${rule.if}: not a form this runner knows`);
      const [left, right] = [value(m[1] as string), value(m[2] as string)];
      if (left === undefined || right === undefined) throw new Error(`rules: if: ${rule.if}: a bad operand`);
      return left === right;
    }),
  );
}

/** GitLab's predefined variables of a merge request pipeline. */
export function gitlabMergeRequest(iid: number, head: string, branch: string): Record<string, string> {
  return {
    CI_PIPELINE_SOURCE: 'merge_request_event',
    CI_MERGE_REQUEST_IID: String(iid),
    CI_MERGE_REQUEST_SOURCE_BRANCH_NAME: branch,
    CI_MERGE_REQUEST_TARGET_BRANCH_NAME: 'main',
    CI_COMMIT_SHA: head,
    CI_COMMIT_REF_NAME: branch,
    CI_DEFAULT_BRANCH: 'main',
  };
}

/** GitLab's predefined variables of a push to main. */
export function gitlabPush(sha: string): Record<string, string> {
  return {
    CI_PIPELINE_SOURCE: 'push',
    CI_COMMIT_SHA: sha,
    CI_COMMIT_BRANCH: 'main',
    CI_COMMIT_REF_NAME: 'main',
    CI_DEFAULT_BRANCH: 'main',
  };
}

/** Sets `version:` of one component (the first `version:` line under its key). */
export function setVersion(text: string, component: string, version: string): string {
  const re = new RegExp(`(\\n  ${component}:\\n(?:    .*\\n)*?    version: )"[^"]*"`);
  const next = text.replace(re, `$1"${version}"`);
  if (next === text) throw new Error(`no version of ${component} to set to ${version}`);
  return next;
}

export interface GitLabRun {
  file: string;
  job: string;
  workspace: string;
  /** CI_* variables and the project's CI/CD variables (CUTOVER_SERVER, GITLAB_TOKEN…). */
  variables: Record<string, string>;
  npmPrefix: string;
  remote: string;
  /** before_script (the install, run once per test file), script, or both (default). */
  part?: 'before_script' | 'script' | 'all';
}

export async function runGitLabJob(run: GitLabRun): Promise<JobResult> {
  const job = resolvedJob(run.file, run.job);
  const { variables: global } = loadGitLab(run.file);
  const variables: Record<string, string> = {
    ...global,
    ...job.variables,
    ...run.variables,
    CI_PROJECT_DIR: run.workspace,
  };
  if (!gitlabRulesMatch(job, variables))
    throw new Error(`${run.job}: its rules do not run it in this pipeline`);
  if (variables.GIT_STRATEGY === 'none') mkdirSync(run.workspace, { recursive: true });
  else await checkout(run.remote, variables.CI_COMMIT_SHA as string, run.workspace);
  // The runner runs before_script and script in one shell, each entry as written, in order.
  const part = run.part ?? 'all';
  const lines = [
    ...(part === 'script' ? [] : (job.before_script ?? [])),
    ...(part === 'before_script' ? [] : (job.script ?? [])),
  ];
  const result = await bash(
    lines.join('\n'),
    run.workspace,
    { ...runnerEnv(run.npmPrefix), ...variables },
    run.job,
  );
  return { code: result.code, steps: [result], workspace: run.workspace };
}
