import { spawn } from 'node:child_process';
import { type ProcessIdentity, processIdentity } from '../../platform/process-identity.js';
import { stopProcessGroup } from './process-group.js';
import type { DriverCallOptions } from './types.js';

/** Between SIGTERM and SIGKILL to a script's process group. */
export const killGraceMs = 2_000;
/** After a script exits, how long its stdout/stderr may stay open (held by something it started). */
const stdioDrainMs = 500;
/** Beyond this, stdout is dropped and the run flagged. */
export const maxStdoutBytes = 1024 * 1024;
const stderrTailLines = 10;

export interface ScriptRun {
  /** Why cutover stopped the script, if it did. */
  stopped?: 'timeout' | 'abort';
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  spawnError?: Error;
  stdout: string;
  stdoutOverflow: boolean;
  stderrTail: string[];
}

export interface ScriptSpec {
  file: string;
  /** Arguments after `file` (no shell); none for exec-driver stage scripts. */
  args?: readonly string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Written to the script's stdin, which is then closed. */
  stdin: string;
  /** After this, the process group is terminated and the run marked stopped: 'timeout'. */
  timeoutMs: number;
  /** Put before every stderr line sent to options.log. */
  prefix: string;
}

/**
 * Runs a script in its own process group and settles when it has exited and its process group is
 * gone or its output closed. Never rejects: everything that happened is in the ScriptRun.
 */
export function runScript(spec: ScriptSpec, options: DriverCallOptions): Promise<ScriptRun> {
  const run: ScriptRun = {
    exitCode: null,
    exitSignal: null,
    stdout: '',
    stdoutOverflow: false,
    stderrTail: [],
  };
  const child = spawn(spec.file, spec.args ?? [], {
    cwd: spec.cwd,
    env: spec.env,
    stdio: 'pipe',
    detached: true,
  });
  const pid = child.pid;
  // Recorded at the start, so a pid reused after the group is gone is never signalled.
  const leader: ProcessIdentity | undefined = pid !== undefined ? processIdentity(pid) : undefined;
  const untrack = pid !== undefined ? options.trackProcess?.(pid) : undefined;

  let stopping: Promise<void> | undefined;
  const stop = (why: 'timeout' | 'abort') => {
    if (leader === undefined || stopping) return;
    run.stopped = why;
    // SIGTERM to the group, SIGKILL killGraceMs later if any of it is left; settles once it is gone.
    stopping = stopProcessGroup(leader, killGraceMs).then(
      () => undefined,
      () => undefined,
    );
  };
  const timer = setTimeout(() => stop('timeout'), spec.timeoutMs);
  const onAbort = () => stop('abort');
  options.signal.addEventListener('abort', onAbort, { once: true });
  if (options.signal.aborted) onAbort();

  child.stdin.on('error', () => {
    // The script exited or closed stdin without reading it all: its choice.
  });
  child.stdin.end(spec.stdin);

  let stdoutBytes = 0;
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (text: string) => {
    stdoutBytes += Buffer.byteLength(text);
    if (stdoutBytes > maxStdoutBytes) run.stdoutOverflow = true;
    else run.stdout += text;
  });

  let partial = '';
  const emit = (line: string) => {
    const clean = line.replace(/\r$/, '');
    options.log(`${spec.prefix}${clean}`);
    run.stderrTail.push(clean);
    if (run.stderrTail.length > stderrTailLines) run.stderrTail.shift();
  };
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text: string) => {
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) emit(line);
  });

  return new Promise((resolve) => {
    let settled = false;
    const finish = async () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      await Promise.all([stopping, closeStdio(child.stdout, child.stderr)]);
      if (partial !== '') emit(partial);
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

/** Waits for both streams to end, up to stdioDrainMs; then stops reading them. */
async function closeStdio(...streams: NodeJS.ReadableStream[]): Promise<void> {
  const closed = streams.map(
    (stream) =>
      new Promise<void>((resolve) => {
        if ((stream as unknown as { readableEnded: boolean }).readableEnded) resolve();
        stream.once('end', resolve);
        stream.once('close', resolve);
      }),
  );
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, stdioDrainMs);
  });
  await Promise.race([Promise.all(closed), late]);
  clearTimeout(timer);
  for (const stream of streams) (stream as unknown as { destroy(): void }).destroy();
}
