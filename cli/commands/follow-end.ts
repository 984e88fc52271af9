/**
 * Why `cutover topology migration logs --follow` stopped, in one line, and its exit code: 0 when
 * the migration ended (however it ended), another code when the following stopped first.
 */
import { CutoverError } from '../../core/errors.js';
import type { MigrationSummary } from '../../core/migration/summary.js';
import { isFinal } from '../../core/migration/types.js';

/** Exit codes of `logs --follow`, by why it stopped (documented in its --help). */
export const followExitCodes = {
  /** The migration ended: completed, rolled back, cancelled or failed. */
  ended: 0,
  /** Its runner died: the migration is in flight with nothing driving it. */
  runnerDied: 3,
  /** The server, Temporal or the runner could not be reached any more; the migration goes on. */
  connectionLost: 4,
} as const;

export interface FollowEnd {
  line: string;
  exitCode: number;
}

/** Errors that mean the follower lost its way to the migration, not that something is wrong with it. */
export function isConnectionLoss(error: unknown): error is CutoverError {
  return (
    error instanceof CutoverError &&
    (error.code === 'SERVER_UNREACHABLE' ||
      error.code === 'TEMPORAL_UNREACHABLE' ||
      error.code === 'RUNNER_UNREACHABLE')
  );
}

/**
 * The end of a follow, from the migration's summary read once the log stopped (or the error that
 * stopped it). `followAgain`: the command that follows it again.
 */
export function followEnd(
  end: { summary: MigrationSummary } | { lost: string },
  followAgain: string,
): FollowEnd {
  if ('lost' in end) {
    return {
      line: `connection lost (${end.lost}); follow again with \`${followAgain}\``,
      exitCode: followExitCodes.connectionLost,
    };
  }
  const { summary } = end;
  if (isFinal(summary.lifecycle)) return { line: endedLine(summary), exitCode: followExitCodes.ended };
  if (summary.runner === 'dead') {
    const pid = summary.deadRunnerPid;
    return {
      line: `runner died${pid === undefined ? '' : ` (pid ${pid})`}: resume with \`${summary.resumeWith}\``,
      exitCode: followExitCodes.runnerDied,
    };
  }
  return {
    line: `connection lost: ${summary.id} goes on (${summary.status}); follow again with \`${followAgain}\``,
    exitCode: followExitCodes.connectionLost,
  };
}

function endedLine(summary: MigrationSummary): string {
  const reason = summary.reason ?? 'no reason recorded';
  switch (summary.lifecycle) {
    case 'completed':
      return 'migration completed';
    case 'rolled_back':
      return `rolled back: ${reason}`;
    case 'cancelled':
      return `cancelled: ${reason}`;
    default:
      return `failed: ${reason}`;
  }
}
