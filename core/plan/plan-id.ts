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

/**
 * A saved plan's seal: the digest of every field of it that the plan id and the topology digest do
 * not cover and that decides what runs or what is recorded: where the topology's relative paths
 * resolve (`topology.file`), what it was planned against, the commit it is recorded as coming from,
 * and when it was saved. An edit of any of them (a `topology.file` pointed at another directory
 * runs another program) is refused like an edit of the plan.
 */
export function savedPlanSealOf(saved: {
  plan: { planId: string };
  digest: string;
  baseSerial: number;
  plannedAgainst: object;
  topology: { file: string };
  commit: string | null;
  createdAt: string;
}): string {
  return sha256Digest(
    canonicalJson({
      planId: saved.plan.planId,
      digest: saved.digest,
      baseSerial: saved.baseSerial,
      plannedAgainst: saved.plannedAgainst,
      topologyFile: saved.topology.file,
      commit: saved.commit,
      createdAt: saved.createdAt,
    }),
  );
}
