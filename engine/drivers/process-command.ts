import { spawn } from 'node:child_process';
import { processIdentity } from '../../platform/process-identity.js';
import { stopProcessGroup } from './process-group.js';
import { killGraceMs } from './run-script.js';
import type { DriverCallOptions } from './types.js';

const stderrTailLines = 10;

export interface CommandSpec {
  /** Program and arguments; no shell. */
  argv: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** After this, the process group is stopped and the run marked stopped: 'timeout'. */
  timeoutMs: number;
  /** Put before every output line sent to options.log. */
  prefix: string;
}

export interface CommandRun {
  stopped?: 'timeout' | 'abort';
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  spawnError?: Error;
  stderrTail: string[];
}

/**
 * Runs a command to completion in its own process group, tracked so that a runner that dies
 * meanwhile has it stopped by the next one. Its stdout and stderr lines go to the migration log.
 * Never rejects: everything that happened is in the CommandRun.
 */
export function runCommand(spec: CommandSpec, options: DriverCallOptions): Promise<CommandRun> {
  const run: CommandRun = { exitCode: null, exitSignal: null, stderrTail: [] };
  const [file = '', ...args] = spec.argv;
  const child = spawn(file, args, {
    cwd: spec.cwd,
    env: spec.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const pid = child.pid;
  const untrack = pid !== undefined ? options.trackProcess?.(pid) : undefined;
  const leader = pid !== undefined ? processIdentity(pid) : undefined;

  let stopping: Promise<unknown> | undefined;
  const stop = (why: 'timeout' | 'abort') => {
    if (!leader || stopping) return;
    run.stopped = why;
    stopping = stopProcessGroup(leader, killGraceMs).catch(() => undefined);
  };
  const timer = setTimeout(() => stop('timeout'), spec.timeoutMs);
  const onAbort = () => stop('abort');
  options.signal.addEventListener('abort', onAbort, { once: true });
  if (options.signal.aborted) onAbort();

  const closed = [
    forwardLines(child.stdout, (line) => options.log(`${spec.prefix}${line}`)),
    forwardLines(child.stderr, (line) => {
      options.log(`${spec.prefix}${line}`);
      run.stderrTail.push(line);
      if (run.stderrTail.length > stderrTailLines) run.stderrTail.shift();
    }),
  ];

  return new Promise((resolve) => {
    let settled = false;
    const finish = async () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      // The command's group may hold its output open: stop it with the command, as a script's.
      if (leader && !stopping) stopping = stopProcessGroup(leader, killGraceMs).catch(() => undefined);
      await Promise.all([stopping, ...closed]);
      untrack?.();
      resolve(run);
    };
    child.on('error', (error) => {
      run.spawnError = error;
      void finish();
    });
    child.on('exit', (code, signal) => {
      run.exitCode = code;
      run.exitSignal = signal;
      void finish();
    });
  });
}

/** Calls `emit` for every line of the stream; resolves when it ends. */
function forwardLines(stream: NodeJS.ReadableStream, emit: (line: string) => void): Promise<void> {
  let partial = '';
  stream.setEncoding('utf8');
  stream.on('data', (text: string) => {
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) emit(line.replace(/\r$/, ''));
  });
  return new Promise((resolve) => {
    stream.once('close', () => {
      if (partial !== '') emit(partial.replace(/\r$/, ''));
      resolve();
    });
  });
}
