import type { ObservedReplica } from '../../core/observed.js';
import { isAlive } from '../../platform/process-identity.js';
import { type ProbeResult, tcpProbe } from '../health/probes.js';
import { type ReplicaRecord, readSlot, recordedReplicas, replicaAddress, slotDirOf } from './process-slot.js';
import type { ComponentCallContext, DriverCallOptions, SlotInfo } from './types.js';

/** How long the first connection to a replica's port may take before it is tried once more. */
export const replicaConnectTimeoutMs = 1_000;
/**
 * How long the second try may take. A SYN that is dropped (a full accept queue, podman's network
 * while it creates or removes a container) is sent again after 1 s, so one try of 1 s cannot tell
 * a dropped SYN from a replica that never answers: a plan then saw a running replica as not
 * answering and refused to migrate.
 */
export const replicaConnectRetryTimeoutMs = 3_000;

/**
 * Whether a replica's address accepts a TCP connection: refused at once, or not within a first
 * try and a longer second one, is not answering. undefined: the observation was stopped.
 */
export async function replicaAnswers(address: string, signal: AbortSignal): Promise<ProbeResult | undefined> {
  const first = await tcpProbe(address).run(replicaConnectTimeoutMs, signal);
  if (!first || first.ok || first.refused) return first;
  return tcpProbe(address).run(replicaConnectRetryTimeoutMs, signal);
}

/**
 * What runs of a process slot: each recorded replica is `running` when its process is alive (by
 * pid and start time, so a pid reused by another program is not) and its port accepts a TCP
 * connection on loopback; `not_answering` when alive but refusing; `not_running` when gone.
 * The replicas come from the slot as the layout recorded it, else from the slot's own record.
 */
export async function observeProcessSlot(
  ctx: ComponentCallContext,
  slot: SlotInfo,
  options: DriverCallOptions,
): Promise<ObservedReplica[]> {
  let replicas = recordedReplicas(slot);
  if (replicas.length === 0) replicas = (await readSlot(slotDirOf(ctx, slot)))?.replicas ?? [];
  return Promise.all(replicas.map((replica) => observeReplica(replica, options.signal)));
}

export async function observeReplica(replica: ReplicaRecord, signal: AbortSignal): Promise<ObservedReplica> {
  const address = replicaAddress(replica);
  const seen = { address, pid: replica.pid };
  if (!isAlive(replica)) return { ...seen, state: 'not_running', detail: 'exited' };
  const probe = await replicaAnswers(address, signal);
  if (!probe) return { ...seen, state: 'unknown', detail: 'observation stopped' };
  if (probe.ok) return { ...seen, state: 'running' };
  // Alive and refusing: most often a program that listens on a port of its own, not on PORT.
  const detail = probe.refused
    ? `${probe.summary}; it does not listen on the port cutover gave it in PORT`
    : probe.summary;
  return { ...seen, state: 'not_answering', detail };
}
