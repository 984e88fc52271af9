import { spawn } from 'node:child_process';
import { type GroupRun, superviseGroup } from './supervised-group.js';
import type { DriverCallOptions } from './types.js';

/** After a script exits, how long its stdout/stderr may stay open (held by something it started). */
const stdioDrainMs = 500;
/** Beyond this, stdout is dropped and the run flagged. */
export const maxStdoutBytes = 1024 * 1024;
const stderrTailLines = 10;

export interface ScriptRun extends GroupRun {
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
export async function runScript(spec: ScriptSpec, options: DriverCallOptions): Promise<ScriptRun> {
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
  const group = superviseGroup(child, run, spec.timeoutMs, options);

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

  await group.ended;
  await Promise.all([group.stopping(), closeStdio(child.stdout, child.stderr)]);
  if (partial !== '') emit(partial);
  group.untrack();
  return run;
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
