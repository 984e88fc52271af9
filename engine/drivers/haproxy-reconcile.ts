/**
 * Bringing a running haproxy's servers to what cutover wants, through the runtime API alone (no
 * reload): the commands for one backend from its servers as `show servers state` reports them.
 * Order matters to traffic: servers that will carry traffic are added and weighted first, then
 * those at weight 0 are drained, then the ones that leave are put in maintenance and deleted, so
 * at no moment does the backend have fewer servers taking new requests than before or after.
 */
import type { DesiredBackend } from './haproxy-config.js';
import { HaproxyRefusedError, runtimeChange, runtimeChanges, type ServerState } from './haproxy-runtime.js';

/** srv_admin_state bits (haproxy's SRV_ADMF_*): set by hand or the API, not by the file. */
export const adminMaintenance = 0x01;
export const adminDrain = 0x08;

export interface BackendPlan {
  /** Commands that must all succeed. */
  changes: string[];
  /** Servers that leave: deleted once idle (`del server` refuses a server with connections). */
  deletions: string[];
}

/** The commands that make `live` (every server haproxy has) serve `desired`. */
export function backendCommands(desired: DesiredBackend, live: readonly ServerState[]): BackendPlan {
  const b = desired.backend;
  const current = new Map(live.filter((s) => s.backend === b).map((s) => [s.name, s]));
  const changes: string[] = [];
  const ordered = [
    ...desired.servers.filter((s) => s.weight > 0),
    ...desired.servers.filter((s) => s.weight === 0),
  ];
  for (const server of ordered) {
    const state = server.weight > 0 ? 'ready' : 'drain';
    const seen = current.get(server.name);
    if (!seen || seen.address !== server.address) {
      if (seen) changes.push(`set server ${b}/${server.name} state maint`, `del server ${b}/${server.name}`);
      // A server added at run time starts in maintenance: its state is set right after.
      changes.push(`add server ${b}/${server.name} ${server.address} weight ${server.weight}`);
      changes.push(`set server ${b}/${server.name} state ${state}`);
      continue;
    }
    if (seen.weight !== server.weight) changes.push(`set server ${b}/${server.name} weight ${server.weight}`);
    const wanted = server.weight > 0 ? 0 : adminDrain;
    if (seen.admin !== wanted) changes.push(`set server ${b}/${server.name} state ${state}`);
  }
  const names = new Set(desired.servers.map((s) => s.name));
  const deletions: string[] = [];
  for (const seen of current.values()) {
    if (names.has(seen.name)) continue;
    if ((seen.admin & adminMaintenance) === 0) changes.push(`set server ${b}/${seen.name} state maint`);
    deletions.push(`${b}/${seen.name}`);
  }
  return { changes, deletions };
}

/**
 * Runs the plans of several backends: every change in one round trip, then the deletions, one by
 * one. A deletion haproxy refuses because the server still has connections (a request finishing,
 * an idle connection kept for reuse) leaves it in maintenance, sent nothing, and out of the file:
 * the next change, or a restart, removes it. Resolves with those kept.
 */
export async function runBackendPlans(socket: string, plans: readonly BackendPlan[]): Promise<string[]> {
  await runtimeChanges(
    socket,
    plans.flatMap((plan) => plan.changes),
  );
  const kept: string[] = [];
  for (const server of plans.flatMap((plan) => plan.deletions)) {
    try {
      await runtimeChange(socket, `del server ${server}`);
    } catch (error) {
      if (!(error instanceof HaproxyRefusedError)) throw error;
      kept.push(server);
    }
  }
  return kept;
}
