import { spawn } from 'node:child_process';
import { type GroupRun, superviseGroup } from './supervised-group.js';
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

export interface CommandRun extends GroupRun {
  stderrTail: string[];
}

/**
 * Runs a command to completion in its own process group, tracked so that a runner that dies
 * meanwhile has it stopped by the next one. Its stdout and stderr lines go to the migration log.
 * Never rejects: everything that happened is in the CommandRun.
 */
export async function runCommand(spec: CommandSpec, options: DriverCallOptions): Promise<CommandRun> {
  const run: CommandRun = { exitCode: null, exitSignal: null, stderrTail: [] };
  const [file = '', ...args] = spec.argv;
  const child = spawn(file, args, {
    cwd: spec.cwd,
    env: spec.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const group = superviseGroup(child, run, spec.timeoutMs, options);
  const closed = [
    forwardLines(child.stdout, (line) => options.log(`${spec.prefix}${line}`)),
    forwardLines(child.stderr, (line) => {
      options.log(`${spec.prefix}${line}`);
      run.stderrTail.push(line);
      if (run.stderrTail.length > stderrTailLines) run.stderrTail.shift();
    }),
  ];
  await group.ended;
  // The command's group may hold its output open: stop it with the command, as a script's.
  await Promise.all([group.stopLeft(), ...closed]);
  group.untrack();
  return run;
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
