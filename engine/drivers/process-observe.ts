import type { ObservedReplica } from '../../core/observed.js';
import { isAlive } from '../../platform/process-identity.js';
import { tcpProbe } from '../health/probes.js';
import { type ReplicaRecord, readSlot, recordedReplicas, replicaAddress, slotDirOf } from './process-slot.js';
import type { ComponentCallContext, DriverCallOptions, SlotInfo } from './types.js';

/** A replica's port that does not accept a connection within this is `not_answering`. */
export const replicaConnectTimeoutMs = 1_000;

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
  const probe = await tcpProbe(address).run(replicaConnectTimeoutMs, signal);
  if (!probe) return { ...seen, state: 'unknown', detail: 'observation stopped' };
  if (probe.ok) return { ...seen, state: 'running' };
  return { ...seen, state: 'not_answering', detail: probe.summary };
}
