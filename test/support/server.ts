/**
 * Helpers of the server tests (test/server/): a `cutover server` built in process (the same flags,
 * service and routes; requests through `inject`), or a real one in a child process (the compiled
 * bin, as a user starts it: for streams, signals, listening and what a user sees), a client that
 * checks every answer against the route's documented response schema (server-api.ts), exec-demo
 * topologies for real migrations, and cleanup that leaves no server, runner or temp directory
 * behind.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot, tempDir } from './cli.js';
import { killRunners } from './migrations.js';
import { exitedAndDrained } from './processes.js';
import { Api } from './server-api.js';
import { type InProcessOptions, type InProcessServer, startInProcess } from './server-in-process.js';
import { waitUntil } from './wait.js';

export * from './server-api.js';

type JsonObject = Record<string, unknown>;

export type { InProcessOptions, InProcessServer } from './server-in-process.js';

/** How long a server may take to print its "listening on" line on a loaded machine. */
const serverStartTimeoutMs = 20_000;

const bin = path.join(repoRoot, 'bin', 'cutover.js');

// ─── Servers ────────────────────────────────────────────────────────────────────────────────────

export interface ServerProcess {
  url: string;
  pid: number;
  stateDir: string;
  child: ChildProcess;
  /** Everything the server wrote so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends a signal (SIGTERM by default) and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface StartOptions {
  stateDir: string;
  workdir?: string;
  /** The server's working directory (default: the repository). */
  cwd?: string;
  args?: string[];
  env?: Record<string, string>;
}

function spawnServer(options: StartOptions): {
  child: ChildProcess;
  out: { stdout: string; stderr: string };
  exited: ServerProcess['exited'];
} {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...options.env };
  if (options.env?.CUTOVER_TOKENS === undefined) delete env.CUTOVER_TOKENS;
  delete env.CUTOVER_STATE_DIR;
  const child = spawn(
    process.execPath,
    [
      bin,
      'server',
      '--port',
      '0',
      '--state-dir',
      options.stateDir,
      '--workdir',
      options.workdir ?? repoRoot,
      ...(options.args ?? []),
    ],
    { cwd: options.cwd ?? repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const out = { stdout: '', stderr: '' };
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out.stdout += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    out.stderr += chunk;
  });
  return { child, out, exited: exitedAndDrained(child) };
}

/**
 * A test file's servers and temp dirs: `cleanup()` (in afterAll) kills every server still running
 * and every runner recorded in their state directories, by pid, then removes the directories.
 */
export class ServerHarness {
  private readonly servers: ServerProcess[] = [];
  private readonly inProcess: InProcessServer[] = [];
  private readonly dirs: { dir: string; cleanup: () => Promise<void> }[] = [];
  private readonly stateDirs = new Set<string>();

  async tempDir(prefix = 'cutover-server-'): Promise<string> {
    const made = await tempDir(prefix);
    this.dirs.push(made);
    return made.dir;
  }

  /** A fresh state directory (inside a temp dir of its own). */
  async stateDir(): Promise<string> {
    return path.join(await this.tempDir(), 'state');
  }

  /** Starts `cutover server --port 0` and waits for its "listening on" line. */
  async start(options: StartOptions): Promise<ServerProcess> {
    this.stateDirs.add(options.stateDir);
    const { child, out, exited } = spawnServer(options);
    let exitedEarly = false;
    void exited.then(() => {
      exitedEarly = true;
    });
    const listeningOn = () => /cutover server listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out.stderr)?.[1];
    await waitUntil(() => listeningOn() !== undefined || exitedEarly, serverStartTimeoutMs);
    const url = listeningOn();
    if (!url) {
      child.kill('SIGKILL');
      throw new Error(`the server did not start:\n${out.stderr}`);
    }
    const server: ServerProcess = {
      url,
      pid: child.pid as number,
      stateDir: options.stateDir,
      child,
      stdout: () => out.stdout,
      stderr: () => out.stderr,
      exited,
      async stop(signal = 'SIGTERM') {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal);
        return exited;
      },
    };
    this.servers.push(server);
    return server;
  }

  /**
   * Runs `cutover server` expecting it to refuse to start: its exit code and output. Fails (and
   * kills it) if it starts listening instead.
   */
  async startRefused(
    options: StartOptions,
  ): Promise<{ code: number | null; stderr: string; listening: boolean }> {
    this.stateDirs.add(options.stateDir);
    const { child, out, exited } = spawnServer(options);
    const outcome = await Promise.race([
      exited.then((e) => ({ ...e, listening: false })),
      (async () => {
        await waitUntil(() => /listening on/.test(out.stderr), serverStartTimeoutMs);
        return { code: null, signal: null, listening: true };
      })(),
    ]);
    if (outcome.listening) {
      child.kill('SIGKILL');
      await exited;
    }
    return { code: outcome.code, stderr: out.stderr, listening: outcome.listening };
  }

  /**
   * Starts a server (on a fresh state directory unless one is given) and connects a checked client
   * to it, with `token` if given.
   */
  async serve(
    options: Partial<StartOptions> = {},
    token: string | null = null,
  ): Promise<{ server: ServerProcess; api: Api }> {
    const server = await this.start({ ...options, stateDir: options.stateDir ?? (await this.stateDir()) });
    return { server, api: await Api.connect(server.url, token) };
  }

  /**
   * Builds a server in this process, as `cutover server` with these flags would run it (closed by
   * cleanup()); its migrations still run in their own runner processes.
   */
  async startInProcess(options: InProcessOptions): Promise<InProcessServer> {
    this.stateDirs.add(options.stateDir);
    const server = await startInProcess(options);
    this.inProcess.push(server);
    return server;
  }

  /**
   * An in-process server (on a fresh state directory unless one is given) and a checked client
   * through `inject` (when it also listens, `Api.connect(server.url)` gives one over loopback).
   */
  async serveInProcess(
    options: Partial<InProcessOptions> = {},
    token: string | null = null,
  ): Promise<{ server: InProcessServer; api: Api }> {
    const server = await this.startInProcess({
      ...options,
      stateDir: options.stateDir ?? (await this.stateDir()),
    });
    return { server, api: await Api.inject(server.app, token) };
  }

  /**
   * Cancels the migrations the tests left in flight and waits for their ends (so that no runner is
   * killed half way), then cleans up, whatever failed.
   */
  async cancelThenCleanup(api: Api | undefined, ids: Iterable<string>): Promise<void> {
    try {
      if (api) for (const id of ids) await api.cancelAndWait(id);
    } finally {
      await this.cleanup();
    }
  }

  async cleanup(): Promise<void> {
    for (const server of this.inProcess) await server.close().catch(() => undefined);
    for (const server of this.servers) {
      if (server.child.exitCode === null && server.child.signalCode === null) {
        server.child.kill('SIGKILL');
        await server.exited;
      }
    }
    for (const stateDir of this.stateDirs) killRunners(stateDir);
    for (const { cleanup } of this.dirs) await cleanup();
  }
}

/** The pids of every runner recorded in a state directory (runner.json), alive or not. */
export function recordedRunnerPids(stateDir: string): number[] {
  const pids: number[] = [];
  const envs = path.join(stateDir, 'environments');
  if (!existsSync(envs)) return pids;
  for (const env of readdirSafe(envs)) {
    const migrations = path.join(envs, env, 'migrations');
    for (const id of readdirSafe(migrations)) {
      const file = path.join(migrations, id, 'runner.json');
      try {
        pids.push((JSON.parse(readFileSync(file, 'utf8')) as { process: { pid: number } }).process.pid);
      } catch {
        // no record
      }
    }
  }
  return pids;
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

// ─── Topologies ─────────────────────────────────────────────────────────────────────────────────

/** Where examples/exec-demo lives, relative to the servers' workdir (the repository). */
export const demoPath = 'examples/exec-demo/topology.yaml';
export const demoText = readFileSync(path.join(repoRoot, demoPath), 'utf8');

/**
 * examples/exec-demo as another environment: its scripts run in well under a second. `bake` and
 * `commit: manual` keep a migration in flight (a long bake: until it is cancelled).
 */
export function demoTopology(
  options: { name: string; version?: string; bake?: string; commit?: 'auto' | 'manual' } = {
    name: 'exec-demo',
  },
): string {
  let text = demoText.replace(/^ {2}name: exec-demo$/m, `  name: ${options.name}`);
  if (options.version !== undefined) text = text.replaceAll('version: "1"', `version: "${options.version}"`);
  if (options.bake !== undefined || options.commit !== undefined) {
    text += `\nstrategy:\n  bake: ${options.bake ?? '0s'}\n  commit: ${options.commit ?? 'auto'}\n`;
  }
  return text;
}

/** An apply body for a demo topology (text, so relative paths resolve against examples/exec-demo). */
export function demoApply(options: Parameters<typeof demoTopology>[0], extra: JsonObject = {}): JsonObject {
  return { topology: demoTopology(options), path: demoPath, ...extra };
}

/** A migration id nobody has (valid form). */
export const unknownId = 'mig_00000000000000000000000000';

/** Runs `fn` over `items` with at most `limit` at a time; results in order. */
export async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>) {
  const results = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i] as T, i);
    }
  });
  await Promise.all(workers);
  return results;
}
