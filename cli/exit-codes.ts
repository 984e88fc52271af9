/**
 * The CLI's exit code for each engine error code. Exhaustive on purpose: a new code does not
 * compile until it has an exit code here. Every error a user can act on exits 1; 70 (EX_SOFTWARE)
 * is a bug in cutover.
 */
import type { ErrorCode } from '../core/errors.js';

export const exitCodes: Record<ErrorCode, number> = {
  TOPOLOGY_INVALID: 1,
  TOPOLOGY_NOT_FOUND: 1,
  TOPOLOGY_TOO_LARGE: 1,
  ENVIRONMENT_MISMATCH: 1,
  GIT_REF_UNREADABLE: 1,
  STATE_CORRUPT: 1,
  MIGRATION_NOT_FOUND: 1,
  ENVIRONMENT_NOT_FOUND: 1,
  MIGRATION_AMBIGUOUS: 1,
  LAYOUT_NOT_FOUND: 1,
  MIGRATION_CONFLICT: 1,
  PLAN_MISMATCH: 1,
  PLAN_STALE: 1,
  PLAN_INVALID: 1,
  VERB_REFUSED: 1,
  RUNNER_UNREACHABLE: 1,
  CANCELLED: 1,
  DRIVER_FAILED: 1,
  TEMPORAL_UNREACHABLE: 1,
  NOT_SUPPORTED: 1,
  SERVER_REFUSED: 1,
  SERVER_UNREACHABLE: 1,
  USAGE: 1,
  ENVIRONMENT_FAULT: 1,
  INTERNAL: 70,
};
