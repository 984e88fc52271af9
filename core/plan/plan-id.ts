import { canonicalJson, sha256Digest } from './canonical-json.js';
import type { Plan } from './types.js';

/**
 * A plan's id: the digest of the canonical JSON of everything it decides, so equal plans have equal
 * ids and any edit of an action, a reason or a count gives another id. `strategy` is left out (the
 * desired topology, which `desiredDigest` covers, holds it) and `drift` counts only when present, so
 * ids reviewed before either existed stay valid. One function for building a plan and for checking
 * a saved one, so the two cannot drift apart.
 */
export function planIdOf(plan: Omit<Plan, 'planId' | 'strategy'>): string {
  const {
    formatVersion,
    environment,
    baseSerial,
    desiredDigest,
    summary,
    resources,
    settings,
    drift,
    actions,
  } = plan;
  return sha256Digest(
    canonicalJson({
      formatVersion,
      environment,
      baseSerial,
      desiredDigest,
      summary,
      resources,
      settings,
      ...(drift === undefined ? {} : { drift }),
      actions,
    }),
  );
}
