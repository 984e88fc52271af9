/**
 * Helpers of the watcher tests (test/watch/): real Git repositories in temporary directories (the
 * git CLI, a fixed identity, no user or system config), the real `cutover watch` and `cutover
 * server` in child processes whose stdout and stderr lines are kept with the time they arrived, and
 * cleanup that kills every child (by pid), every migration runner and removes every directory.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { repoRoot, runCli, tempDir } from './cli.js';
import { copyFixture, freePort, killRunners } from './migrations.js';
import { exitedAndDrained } from './processes.js';

const bin = path.join(repoRoot, 'bin', 'cutover.js');

/** The environment of every git command the tests run: a fixed identity, no user or system config. */
export const gitEnv: NodeJS.ProcessEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: 'Cutover Test',
  GIT_AUTHOR_EMAIL: 'test@cutover.invalid',
  GIT_COMMITTER_NAME: 'Cutover Test',
  GIT_COMMITTER_EMAIL: 'test@cutover.invalid',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_TERMINAL_PROMPT: '0',
};

/** Runs `git ...args` in `cwd`; its stdout, trimmed. Rejects with git's stderr. */
export function git(cwd: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, env: gitEnv, timeout: 20_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`git ${args.join(' ')}: ${stderr.trim() || error.message}`));
      else resolve(stdout.trim());
    });
  });
}

// ─── Temp dirs and processes, all cleaned up ──────────────────────────────────────────────────────

/** Registry: the directories `scratch` made, emptied by `cleanUp()` (every user's afterEach or afterAll). */
const dirs: { cleanup: () => Promise<void> }[] = [];
/** Registry: the state directories `trackStateDir` took, emptied by `cleanUp()`. */
const stateDirs = new Set<string>();
/** Registry: the children started here, emptied by `cleanUp()`. */
const children = new Set<ChildProcess>();

/** A temporary directory, removed by `cleanUp()`. */
export async function scratch(prefix = 'cutover-watch-'): Promise<string> {
  const t = await tempDir(prefix);
  dirs.push(t);
  return t.dir;
}

/** Runners and routers recorded in this state directory are killed by `cleanUp()`. */
export function trackStateDir(stateDir: string): string {
  stateDirs.add(stateDir);
  return stateDir;
}

/** Kills every child still running (by pid), every runner of every tracked state dir, removes every dir. */
export async function cleanUp(): Promise<void> {
  const exits: Promise<unknown>[] = [];
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      exits.push(new Promise((resolve) => child.once('exit', resolve)));
      child.kill('SIGKILL');
    }
  }
  children.clear();
  await Promise.race([Promise.all(exits), sleep(5_000)]);
  for (const stateDir of stateDirs) killRunners(stateDir);
  stateDirs.clear();
  for (const d of dirs.splice(0)) await d.cleanup();
}

// ─── Repositories ───────────────────────────────────────────────────────────────────────────────

export interface Commit {
  sha: string;
  short: string;
  /** performance.now() when `git commit` (or push) returned. */
  at: number;
}

export class Repo {
  constructor(readonly dir: string) {}

  path(file = 'topology.yaml'): string {
    return path.join(this.dir, file);
  }

  read(file = 'topology.yaml'): string {
    return readFileSync(this.path(file), 'utf8');
  }

  write(text: string, file = 'topology.yaml'): void {
    writeFileSync(this.path(file), text);
  }

  /** Sets `version:` of one component in topology.yaml (the first `version:` line after its key). */
  setVersion(component: string, version: string): void {
    const re = new RegExp(`(\\n  ${component}:\\n(?:    .*\\n)*?    version: )"[^"]*"`);
    const text = this.read();
    const next = text.replace(re, `$1"${version}"`);
    if (next === text && !text.includes(`version: "${version}"`)) {
      throw new Error(`no version of ${component} in ${this.path()}`);
    }
    this.write(next);
  }

  git(...args: string[]): Promise<string> {
    return git(this.dir, ...args);
  }

  /** Commits everything (`add -A`); the commit and when `git commit` returned. */
  async commit(message: string): Promise<Commit> {
    await this.git('add', '-A');
    await this.git('commit', '-q', '--allow-empty', '-m', message);
    const at = performance.now();
    const sha = await this.git('rev-parse', 'HEAD');
    return { sha, short: sha.slice(0, 7), at };
  }

  async head(): Promise<string> {
    return this.git('rev-parse', 'HEAD');
  }
}

/**
 * A repository on branch main with a copy of a fixture (its route ports made free ones), committed.
 * `examples/exec-demo` migrates in well under a second; `test/fixtures/gated` holds its health gate
 * until `<stateDir>/release-gate` exists.
 */
export async function initRepo(fixture = 'examples/exec-demo'): Promise<Repo> {
  const dir = path.join(await scratch(), 'repo');
  copyFixture(path.join(repoRoot, fixture), dir);
  await git(repoRoot, 'init', '-q', '-b', 'main', dir);
  const repo = new Repo(dir);
  let text = repo.read();
  for (const port of new Set([...text.matchAll(/127\.0\.0\.1:(\d{4,5})/g)].map((m) => m[1] as string))) {
    text = text.replaceAll(`127.0.0.1:${port}`, `127.0.0.1:${await freePort()}`);
  }
  repo.write(text);
  await repo.commit('initial topology');
  return repo;
}

/** A bare repository that `repo` pushes to as origin (main pushed); its file:// URL. */
export async function bareRemote(repo: Repo): Promise<{ bare: string; url: string }> {
  const bare = path.join(path.dirname(repo.dir), 'remote.git');
  await git(repoRoot, 'init', '-q', '--bare', '-b', 'main', bare);
  // As Git hosts allow: the branch that HEAD names may be deleted by a push.
  await git(bare, 'config', 'receive.denyDeleteCurrent', 'ignore');
  await repo.git('remote', 'add', 'origin', bare);
  await repo.git('push', '-q', 'origin', 'main');
  return { bare, url: `file://${bare}` };
}

// ─── Child processes ────────────────────────────────────────────────────────────────────────────

export interface Line {
  text: string;
  /** performance.now() when it arrived. */
  at: number;
}

/** A child process of the real CLI, its output kept line by line. */
export class CliProcess {
  readonly child: ChildProcess;
  readonly out: Line[] = [];
  readonly err: Line[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Exited, and its output read to the end. */
  private drained = false;

  constructor(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
    const env: NodeJS.ProcessEnv = { ...gitEnv, NO_COLOR: '1', ...options.env };
    if (options.env?.CUTOVER_STATE_DIR === undefined) delete env.CUTOVER_STATE_DIR;
    if (options.env?.CUTOVER_HOOK_SECRET === undefined) delete env.CUTOVER_HOOK_SECRET;
    if (options.env?.CUTOVER_TOKENS === undefined) delete env.CUTOVER_TOKENS;
    this.child = spawn(process.execPath, [bin, ...args], {
      cwd: options.cwd ?? repoRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(this.child);
    this.exited = exitedAndDrained(this.child).then((exit) => {
      children.delete(this.child);
      this.drained = true;
      return exit;
    });
    collect(this.child.stdout, this.out);
    collect(this.child.stderr, this.err);
  }

  get pid(): number {
    return this.child.pid as number;
  }

  alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** stdout and stderr so far, for failure messages. */
  transcript(): string {
    const o = this.out.map((l) => l.text).join('\n');
    const e = this.err.map((l) => l.text).join('\n');
    return `--- stdout\n${o}\n--- stderr\n${e}`;
  }

  /** The first stdout line after index `from` that matches; waits for it (bounded). */
  async line(re: RegExp, options: { from?: number; timeoutMs?: number; stream?: 'out' | 'err' } = {}) {
    const lines = options.stream === 'err' ? this.err : this.out;
    const deadline = performance.now() + (options.timeoutMs ?? 15_000);
    for (;;) {
      for (let i = options.from ?? 0; i < lines.length; i++) {
        const line = lines[i] as Line;
        const match = re.exec(line.text);
        if (match) return { ...line, index: i, match };
      }
      if (this.drained && lines === this.out) {
        throw new Error(`the process exited before a line matching ${re}\n${this.transcript()}`);
      }
      if (performance.now() > deadline) {
        throw new Error(`no line matching ${re} in time\n${this.transcript()}`);
      }
      await sleep(5);
    }
  }

  /** Stdout lines (texts) that match. */
  matching(re: RegExp): string[] {
    return this.out.map((l) => l.text).filter((t) => re.test(t));
  }

  /** SIGTERM, then SIGKILL after a grace period; the exit. */
  async stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.alive()) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 3_000);
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    }
    return this.exited;
  }
}

function collect(stream: NodeJS.ReadableStream | null, into: Line[]): void {
  if (!stream) return;
  let rest = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    const at = performance.now();
    rest += chunk;
    const parts = rest.split('\n');
    rest = parts.pop() ?? '';
    for (const text of parts) into.push({ text, at });
  });
  stream.on('end', () => {
    if (rest !== '') into.push({ text: rest, at: performance.now() });
  });
}

export interface WatchArgs {
  repo: string;
  out: string;
  stateDir: string;
  extra?: string[];
}

/** `cutover watch --repo … --out … --state-dir …`, started. */
export function startWatch(options: WatchArgs): CliProcess {
  trackStateDir(options.stateDir);
  return new CliProcess([
    'watch',
    '--repo',
    options.repo,
    '--out',
    options.out,
    '--state-dir',
    options.stateDir,
    ...(options.extra ?? []),
  ]);
}

/** `cutover server --port 0 --state-dir …`; resolves with its URL once it listens. */
export async function startServer(
  stateDir: string,
  env: NodeJS.ProcessEnv = {},
): Promise<{ process: CliProcess; url: string }> {
  trackStateDir(stateDir);
  const server = new CliProcess(
    ['server', '--port', '0', '--state-dir', stateDir, '--workdir', path.dirname(stateDir)],
    { env },
  );
  const line = await server.line(/listening on (http:\/\/[0-9.]+:\d+)/, { stream: 'err', timeoutMs: 20_000 });
  return { process: server, url: line.match[1] as string };
}

// ─── Files ──────────────────────────────────────────────────────────────────────────────────────

/** Waits until a file exists (polled every 5 ms, bounded); performance.now() when it was seen. */
export async function waitForFile(file: string, timeoutMs = 15_000): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (!existsSync(file)) {
    if (performance.now() > deadline) throw new Error(`${file} did not appear in ${timeoutMs} ms`);
    await sleep(5);
  }
  return performance.now();
}

/** `<out>/<environment>/<short>.plan.{md,json}` */
export function reportPaths(out: string, environment: string, short: string): { md: string; json: string } {
  const base = path.join(out, environment, `${short}.plan`);
  return { md: `${base}.md`, json: `${base}.json` };
}

export interface PlanJson {
  environment: string;
  planId: string;
  summary: { add: number; change: number; remove: number };
  resources: {
    name: string;
    change: string;
    reason: string;
    changes: { path: string; before: unknown; after: unknown }[];
  }[];
  actions: { id: string; component?: string }[];
}

export function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(file, 'utf8')) as T;
}

/** The version a plan gives a component: from its `version` change, or the reason of an added one. */
export function plannedVersion(plan: PlanJson, component: string): unknown {
  const resource = plan.resources.find((r) => r.name === component);
  const change = resource?.changes.find((c) => c.path === 'version');
  if (change) return change.after;
  return resource?.change === 'add' ? /\(version ([^,]+),/.exec(resource.reason)?.[1] : undefined;
}

/** Migrates a repository's working-tree topology into `stateDir` (in the foreground): a baseline layout. */
export async function migrateBaseline(repo: Repo, stateDir: string): Promise<void> {
  trackStateDir(stateDir);
  const result = await runCli(['topology', 'migrate', '-f', repo.path(), '--yes', '--json'], {
    env: { CUTOVER_STATE_DIR: stateDir },
  });
  if (result.code !== 0) throw new Error(`baseline migration failed: ${result.stderr}${result.stdout}`);
}

// ─── Migrations ─────────────────────────────────────────────────────────────────────────────────

/** `cutover topology migration list --all --json` of a state directory. */
export interface MigrationRow {
  id: string;
  lifecycle: string;
  /** ISO 8601. */
  startedAt: string;
  endedAt: string | null;
}

export async function migrations(stateDir: string): Promise<MigrationRow[]> {
  const result = await runCli(['topology', 'migration', 'list', '--all', '--json', '--state-dir', stateDir]);
  if (result.code !== 0)
    throw new Error(`migration list failed (exit ${result.code}): ${result.stdout}${result.stderr}`);
  return (JSON.parse(result.stdout) as { items: MigrationRow[] }).items;
}

/** Polls `migration list` until the predicate holds (bounded). */
export async function waitForMigrations(
  stateDir: string,
  predicate: (list: MigrationRow[]) => boolean,
  timeoutMs = 20_000,
): Promise<MigrationRow[]> {
  const deadline = Date.now() + timeoutMs;
  let last: MigrationRow[] = [];
  while (Date.now() < deadline) {
    last = await migrations(stateDir);
    if (predicate(last)) return last;
    await sleep(100);
  }
  throw new Error(`migrations never matched; last: ${JSON.stringify(last)}`);
}
