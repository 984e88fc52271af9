import { formatDuration } from '../../core/topology/duration.js';
import type { CommandHook } from '../../core/topology/hook-types.js';
import { exitCodeRetry } from '../drivers/exec-driver.js';
import { runScript } from '../drivers/run-script.js';
import { spawnFailure } from '../drivers/spawn-failure.js';
import type { DriverCallOptions } from '../drivers/types.js';
import { type AttemptOutcome, oneLine } from './attempt.js';

/** Of the last lines of stderr, how much a failure reason quotes. */
const quotedStderrChars = 300;

export interface CommandRun {
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdin: string;
}

/**
 * One run of a command hook, as exec drivers run their scripts (engine/drivers/run-script.ts): its
 * own process group, stopped (SIGTERM, then SIGKILL) at the timeout or at once when the signal
 * aborts, stderr lines to the log. Exit 0 passes; 75 (EX_TEMPFAIL) and a timeout may be retried;
 * any other exit, a signal, or a program that cannot start fails at once.
 */
export async function runCommandHook(
  hook: CommandHook,
  run: CommandRun,
  options: DriverCallOptions,
): Promise<AttemptOutcome> {
  const [file, ...args] = hook.command as [string, ...string[]];
  const result = await runScript(
    {
      file,
      args,
      cwd: run.cwd,
      env: run.env,
      stdin: run.stdin,
      timeoutMs: hook.timeout,
      prefix: `[hook ${hook.name}] `,
    },
    options,
  );
  const tail = oneLine(result.stderrTail.join(' | '), quotedStderrChars);
  const lastLines = tail ? { detail: `; last lines: ${tail}` } : {};
  if (result.stopped === 'abort') return { ok: false, aborted: true };
  if (result.stopped === 'timeout') {
    return { ok: false, retry: true, what: `timed out after ${formatDuration(hook.timeout)}`, ...lastLines };
  }
  if (result.spawnError) {
    return { ok: false, retry: false, what: `could not start: ${spawnFailure(result.spawnError, run.cwd)}` };
  }
  if (result.exitCode === 0) return { ok: true };
  if (result.exitCode === exitCodeRetry) {
    return { ok: false, retry: true, what: `exited with code ${exitCodeRetry} (EX_TEMPFAIL)`, ...lastLines };
  }
  const how =
    result.exitCode === null ? `was killed by ${result.exitSignal}` : `exited with code ${result.exitCode}`;
  return { ok: false, retry: false, what: how, ...lastLines };
}
