import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { CommandContext } from '../../cli/context.js';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(repoRoot, 'bin', 'cutover.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** Where relative paths resolve (default: the repository's root). */
  cwd?: string;
  /** Merged over the test process's environment, with NO_COLOR=1. */
  env?: NodeJS.ProcessEnv;
}

/** A stream that keeps what is written to it, as a pipe would (not a terminal). */
export function captured(): { stream: Writable; text(): string } {
  const chunks: string[] = [];
  const stream = new Writable({
    decodeStrings: false,
    write(chunk: string | Buffer, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return { stream, text: () => chunks.join('') };
}

/**
 * A context for calling a command's code directly: captured streams, an empty standard input that
 * is not a terminal, `env` over the test process's with NO_COLOR=1.
 */
export function testContext(options: CliOptions = {}): {
  context: CommandContext;
  stdout(): string;
  stderr(): string;
} {
  const stdout = captured();
  const stderr = captured();
  return {
    context: {
      stdout: stdout.stream,
      stderr: stderr.stream,
      stdin: Readable.from([]),
      env: { ...process.env, NO_COLOR: '1', ...options.env },
      cwd: options.cwd ?? repoRoot,
    },
    stdout: stdout.text,
    stderr: stderr.text,
  };
}

/** Runs in flight, and runs started so far: a run compares the process only when it ran alone. */
const runs = { inFlight: 0, started: 0 };

/** What a command run must leave of the test process as it found it. */
function processState(): string {
  return JSON.stringify({
    exitCode: process.exitCode,
    cwd: process.cwd(),
    env: process.env,
    sigint: process.listenerCount('SIGINT'),
    sigterm: process.listenerCount('SIGTERM'),
  });
}

/**
 * Runs the CLI in this process, as `cutover ARGS` would in `cwd` with `env`: the source's `main`
 * with captured streams, its exit code and output. Each call builds its own program; a command
 * that changed the process (its exit code, environment, directory, signal listeners) fails the
 * call. Background processes a command starts (a migration's runner, the router) are real ones,
 * from the compiled bin: build first (`npm run build`).
 */
export function runCli(args: string[], options: CliOptions = {}): Promise<CliResult> {
  return startCli(args, options).done;
}

/** A command started by `startCli`: its output so far while it runs, and its end. */
export interface RunningCli {
  stdout(): string;
  stderr(): string;
  done: Promise<CliResult>;
}

/**
 * As `runCli`, for a command the test watches while it runs (`logs --follow`): what it printed so
 * far is there to wait on before the test goes on.
 */
export function startCli(args: string[], options: CliOptions = {}): RunningCli {
  const run = testContext(options);
  return { stdout: run.stdout, stderr: run.stderr, done: runMain(args, run) };
}

async function runMain(args: string[], run: ReturnType<typeof testContext>): Promise<CliResult> {
  // A turn of the event loop first, as a process start gives: a test polling with runCli in a loop
  // would otherwise keep this process's own work (an in-process migration) from ever running.
  await new Promise((resolve) => setImmediate(resolve));
  const { main } = await import('../../cli/main.js');
  const before = processState();
  const first = runs.inFlight === 0;
  runs.inFlight += 1;
  runs.started += 1;
  const mine = runs.started;
  let code: number;
  try {
    code = await main([process.execPath, bin, ...args], run.context);
  } finally {
    runs.inFlight -= 1;
  }
  const alone = first && runs.inFlight === 0 && runs.started === mine;
  const after = processState();
  if (alone && after !== before) {
    throw new Error(`cutover ${args.join(' ')} changed the test process: ${before} → ${after}`);
  }
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

/**
 * Runs the real CLI (the compiled bin, as a user would) in a child process: for what only the
 * process shows (its exit code, help and version as printed, signals, standard input, the
 * installed binary). Everything else goes through `runCli`.
 */
export function runBinary(args: string[], options: CliOptions = {}): Promise<CliResult> {
  if (!existsSync(path.join(repoRoot, 'dist', 'cli', 'wire-process.js'))) {
    throw new Error('dist/ is missing: run `npm run build` (npm test does it) before the CLI tests');
  }
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      {
        cwd: options.cwd ?? repoRoot,
        env: { ...process.env, NO_COLOR: '1', ...options.env },
        timeout: 30_000,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A temporary directory that the returned cleanup removes; tests call it in afterEach. */
export async function tempDir(
  prefix = 'cutover-test-',
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}
