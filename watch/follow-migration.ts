/**
 * `--apply` follows each migration it started to its end, in the background (one promise each: an
 * environment's migration never holds up the checks or another environment's), and says how it
 * ended: completed, failed with the reason, rolled back, cancelled, or stopped without ending (its
 * runner died: the status names the command that resumes it).
 */
import type { MigrationSummary } from '../core/migration/summary.js';
import { isFinal } from '../core/migration/types.js';
import type { MigrationService } from '../engine/services/migration-service.js';
import type { Outcome } from './reports.js';

/**
 * Resolves once the migration has ended (or nothing drives it any more), with its outcome; null
 * when `signal` aborted first (the watcher stops; the migration goes on without it).
 */
export async function followToEnd(
  service: MigrationService,
  id: string,
  signal: AbortSignal,
): Promise<Outcome | null> {
  // The log ends once the migration has ended, or once no runner drives it (engine's readLog and
  // followElsewhere): its lines themselves are for `migration logs`, the end is what matters here.
  for await (const _line of service.logs(id, { follow: true, signal })) {
    if (signal.aborted) return null;
  }
  if (signal.aborted) return null;
  return outcomeOf((await service.show(id)).summary);
}

export function outcomeOf(summary: MigrationSummary): Outcome {
  const base = { planId: summary.planId, migrationId: summary.id };
  const reason = summary.reason === null ? {} : { reason: summary.reason };
  if (!isFinal(summary.lifecycle)) return { ...base, state: 'stopped', reason: summary.status };
  switch (summary.lifecycle) {
    case 'completed':
      return { ...base, state: 'completed' };
    case 'failed':
      return { ...base, state: 'failed', reason: summary.reason ?? summary.status };
    case 'rolled_back':
      return { ...base, state: 'rolled_back', ...reason };
    case 'cancelled':
      return { ...base, state: 'cancelled', ...reason };
    default:
      return { ...base, state: 'stopped', reason: summary.status };
  }
}
