import { spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
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
  const child = spawn(spec.file, [], { cwd: spec.cwd, env: spec.env, stdio: 'pipe', detached: true });
  const pid = child.pid;
  const untrack = pid !== undefined ? options.trackProcess?.(pid) : undefined;

  let stopping: Promise<void> | undefined;
  const stop = (why: 'timeout' | 'abort') => {
    if (pid === undefined || stopping) return;
    run.stopped = why;
    stopping = terminateGroup(pid);
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

/** SIGTERM to the group, SIGKILL killGraceMs later if any of it is left; resolves once it is gone. */
async function terminateGroup(pgid: number): Promise<void> {
  signalGroup(pgid, 'SIGTERM');
  if (await groupGoneWithin(pgid, killGraceMs)) return;
  signalGroup(pgid, 'SIGKILL');
  await groupGoneWithin(pgid, killGraceMs);
}

function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false; // ESRCH: nothing left in the group.
  }
}

async function groupGoneWithin(pgid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (await groupAlive(pgid)) {
    if (Date.now() >= until) return false;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return true;
}

/**
 * Whether any process of the group still runs. Zombies do not count: an orphan that died is reaped
 * by init whenever init gets to it (over a second in some containers), and it holds nothing. Where
 * /proc is missing, kill(-pgid, 0) answers, zombies included.
 */
async function groupAlive(pgid: number): Promise<boolean> {
  if (!signalGroup(pgid, 0)) return false;
  if (process.platform !== 'linux') return true;
  const entries = await readdir('/proc').catch(() => undefined);
  if (!entries) return true;
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // "pid (comm) state ppid pgrp …"; comm may hold spaces and parentheses, so split after the last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z') return true;
  }
  return false;
}
