/**
 * What a command runs with: its streams, environment and working directory, handed in (as
 * Terraform's views take their `Streams`) rather than read from the process. `cli/wire-process.ts`
 * builds the one for the real process; the tests build their own and run commands in-process.
 */
import path from 'node:path';
import type { Style } from '../views/style.js';
import { styleFor } from '../views/style.js';

/** A stream a command writes to; `isTTY` and the size where the live view draws on a terminal. */
export type OutputStream = NodeJS.WritableStream & { isTTY?: boolean; columns?: number; rows?: number };

export interface CommandContext {
  stdout: OutputStream;
  stderr: OutputStream;
  /** What `confirm` reads a `yes` from (asked only when it is a terminal). */
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /** Where the command's relative paths resolve. */
  cwd: string;
}

/** A command's action: its exit code, or nothing for 0. */
export type CommandAction<A extends unknown[]> = (...args: A) => Promise<number | undefined>;

/** A context for the commands of one run, and the exit code their action returned. */
export interface CommandRun extends CommandContext {
  /** Wraps an action for commander (which drops what an action returns), keeping its exit code. */
  action<A extends unknown[]>(action: CommandAction<A>): (...args: A) => Promise<void>;
  /** The exit code the action returned (0 until one ran). */
  readonly exitCode: number;
}

export function commandRun(context: CommandContext): CommandRun {
  let exitCode = 0;
  return {
    stdout: context.stdout,
    stderr: context.stderr,
    // Read when asked: the process's stdin is made on first use, and then holds the process open.
    get stdin() {
      return context.stdin;
    },
    env: context.env,
    cwd: context.cwd,
    action:
      <A extends unknown[]>(action: CommandAction<A>) =>
      async (...args: A) => {
        exitCode = (await action(...args)) ?? 0;
      },
    get exitCode() {
      return exitCode;
    },
  };
}

/**
 * A path as the engine takes it. The engine resolves relative paths against the process's own
 * directory, which is the command's own when run from the terminal: the path is then kept as the
 * user wrote it (messages repeat it). A command run in-process elsewhere gets it anchored there.
 */
export function pathIn(context: Pick<CommandContext, 'cwd'>, file: string): string {
  if (path.isAbsolute(file) || path.resolve(context.cwd) === path.resolve()) return file;
  return path.join(context.cwd, file);
}

/** Colour for a stream of the command's, by its environment (NO_COLOR, TERM). */
export function styleOf(context: Pick<CommandContext, 'env'>, stream: OutputStream): Style {
  return styleFor(stream, context.env);
}
