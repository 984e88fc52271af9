/**
 * The one registry of cutover's errors. Every error the engine raises carries a stable code; the CLI
 * maps codes to an exit code and one clear line, the server (later) to an HTTP status and problem+json.
 */
import type { Diagnostic } from './topology/diagnostic.js';

export const errorCodes = {
  TOPOLOGY_INVALID: { exitCode: 1, httpStatus: 422, title: 'Topology is invalid' },
  TOPOLOGY_NOT_FOUND: { exitCode: 1, httpStatus: 404, title: 'Topology file not found' },
  TOPOLOGY_TOO_LARGE: { exitCode: 1, httpStatus: 413, title: 'Topology file too large' },
  ENVIRONMENT_MISMATCH: { exitCode: 1, httpStatus: 422, title: 'Environments differ' },
  GIT_REF_UNREADABLE: { exitCode: 1, httpStatus: 422, title: 'Cannot read the topology at a Git revision' },
  STATE_CORRUPT: { exitCode: 1, httpStatus: 500, title: 'State directory is corrupt' },
  MIGRATION_NOT_FOUND: { exitCode: 1, httpStatus: 404, title: 'Migration not found' },
  MIGRATION_AMBIGUOUS: { exitCode: 1, httpStatus: 400, title: 'Migration id prefix is ambiguous' },
  MIGRATION_CONFLICT: {
    exitCode: 1,
    httpStatus: 409,
    title: 'A migration is in flight for this environment',
  },
  PLAN_MISMATCH: { exitCode: 1, httpStatus: 409, title: 'The plan differs from the one reviewed' },
  PLAN_STALE: { exitCode: 1, httpStatus: 409, title: 'The plan is stale' },
  VERB_REFUSED: { exitCode: 1, httpStatus: 409, title: 'The migration cannot do that now' },
  RUNNER_UNREACHABLE: {
    exitCode: 1,
    httpStatus: 503,
    title: 'The process driving the migration does not answer',
  },
  CANCELLED: { exitCode: 1, httpStatus: 409, title: 'Cancelled' },
  /** A driver refused or failed outside a migration (taking an environment down). */
  DRIVER_FAILED: { exitCode: 1, httpStatus: 502, title: 'A driver failed' },
  TEMPORAL_UNREACHABLE: { exitCode: 1, httpStatus: 503, title: 'Temporal (WORKFLOW_HOST) cannot be reached' },
  NOT_SUPPORTED: { exitCode: 1, httpStatus: 501, title: 'Not available in this mode' },
  /** Raised by the CLI when a cutover server (`--server`) refuses a request for a reason of its own. */
  SERVER_REFUSED: { exitCode: 1, httpStatus: 502, title: 'The cutover server refused the request' },
  SERVER_UNREACHABLE: { exitCode: 1, httpStatus: 502, title: 'The cutover server cannot be reached' },
  USAGE: { exitCode: 1, httpStatus: 400, title: 'Bad usage' },
  INTERNAL: { exitCode: 70, httpStatus: 500, title: 'Internal error (a bug in cutover)' },
} as const;

export type ErrorCode = keyof typeof errorCodes;

export class CutoverError extends Error {
  override readonly name = 'CutoverError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

/** An invariant of cutover itself was violated: a bug, never a user error. */
export class InvariantError extends CutoverError {
  constructor(message: string) {
    super('INTERNAL', `invariant violated: ${message}`);
  }
}

export function assertNever(value: never, what: string): never {
  throw new InvariantError(`unexpected ${what}: ${JSON.stringify(value)}`);
}

/**
 * Raised with every located problem of a topology; front ends print them one per line. (Here, not
 * in api.ts, so that reporting it does not load the topology loader.)
 */
export class TopologyInvalidError extends CutoverError {
  constructor(readonly diagnostics: Diagnostic[]) {
    super(
      'TOPOLOGY_INVALID',
      `${diagnostics.length} problem${diagnostics.length === 1 ? '' : 's'} in the topology`,
    );
  }
}
