import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { formatDuration } from '../../core/topology/duration.js';
import { defaults } from '../../core/topology/types.js';
import type { ProcessIdentity } from '../../platform/process-identity.js';
import { writeJsonAtomic } from '../store/layout-store.js';
import { awaitProcessGroup, type StopOutcome, stopProcessGroup } from './process-group.js';
import { slotLogPumps, unrecordedReplicas } from './process-strays.js';
import type { ComponentCallContext, Slot, SlotInfo } from './types.js';

/**
 * A slot of a component on the process driver, as recorded in `<slot dir>/slot.json`. The record is
 * written before the replicas start and after each one, so whoever comes next (a retry, a runner
 * that took over, `topology down`) finds the processes the slot left running; one started just
 * before its starter was killed is not in it yet, and stopping the slot looks for it too
 * (process-strays.ts).
 */
export interface SlotRecord {
  formatVersion: 1;
  environment: string;
  component: string;
  slot: Slot;
  slotId: string;
  version: string;
  command: string[];
  cwd: string;
  startedAt: string;
  replicas: ReplicaRecord[];
  /** Set once retire stopped every replica; the directory stays, with its logs, for people. */
  retired?: boolean;
  retiredAt?: string;
}

/** One process of a slot: its identity (pid + start time), port and log file. */
export interface ReplicaRecord extends ProcessIdentity {
  index: number;
  port: number;
  /** The address it listens on (its HOST): the driver's `address`; absent, 127.0.0.1. */
  address?: string;
  log: string;
  /** The log pump writing its log (process-spawn.ts); none in a record from before pumps. */
  pump?: ProcessIdentity;
}

/** Where a replica is reached: `host:port` (`[v6]:port`). */
export function replicaAddress(replica: Pick<ReplicaRecord, 'address' | 'port'>): string {
  const host = replica.address ?? loopbackAddress;
  return host.includes(':') ? `[${host}]:${replica.port}` : `${host}:${replica.port}`;
}

/** Where replicas listen unless their driver says `address`. */
export const loopbackAddress = '127.0.0.1';

/**
 * How long a replica's log pump may take to write the replica's last lines and end, once the
 * replica is gone, before it is killed: the pump may still be starting on a busy machine, or a
 * process the replica started (outside its group) may hold its output open.
 */
export const defaultLogPumpEndTimeoutMs = 10_000;

export interface StoppedReplica {
  replica: ReplicaRecord;
  outcome: StopOutcome;
}

export function slotFile(slotDir: string): string {
  return path.join(slotDir, 'slot.json');
}

/** The slot's record, or null when the slot was never provisioned here. */
export async function readSlot(slotDir: string): Promise<SlotRecord | null> {
  const file = slotFile(slotDir);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    return JSON.parse(text) as SlotRecord;
  } catch (error) {
    throw new Error(`${file}: not valid JSON (${(error as Error).message})`);
  }
}

export async function writeSlot(slotDir: string, record: SlotRecord): Promise<void> {
  await writeJsonAtomic(slotFile(slotDir), record);
}

export interface StopOptions {
  /** After the replicas are gone, how long their log pumps may take to end (default 10 s). */
  logPumpEndTimeoutMs?: number;
  /** SIGTERM to SIGKILL; the process driver's `stopTimeout`. */
  stopTimeoutMs?: number;
  /** Replicas known from elsewhere (the slot info a migration journaled), stopped as well. */
  replicas?: ReplicaRecord[];
  log?: (line: string) => void;
  signal?: AbortSignal;
}

/**
 * Stops every process recorded for the slot in `slotDir` (and any given in options), gracefully,
 * waits for their log pumps to write their last lines and end, and marks the slot retired: nothing
 * of the slot runs, nor writes in its directory, once this returns. Idempotent: processes already
 * gone are skipped, and a slot that was never recorded has nothing to mark.
 */
export async function stopSlotProcesses(
  slotDir: string,
  options: StopOptions = {},
): Promise<StoppedReplica[]> {
  const record = await readSlot(slotDir);
  const replicas = uniqueIdentities([...(options.replicas ?? []), ...(record?.replicas ?? [])]);
  const strays = unrecordedReplicas(slotDir, new Set(replicas.map((r) => r.pid))).map(
    (identity): ReplicaRecord => ({ ...identity, index: unrecordedIndex, port: 0, log: '' }),
  );
  const graceMs = options.stopTimeoutMs ?? defaults.processStopTimeoutMs;
  const name = `${record ? `${record.component} ` : ''}replica`;
  const stopped = await Promise.all(
    [...replicas, ...strays].map(async (replica) => {
      const outcome = await stopProcessGroup(replica, graceMs, options.signal);
      if (outcome !== 'not-running') {
        const how = outcome === 'killed' ? `killed after ${formatDuration(graceMs)}` : 'stopped';
        const which =
          replica.index === unrecordedIndex
            ? ` (pid ${replica.pid}), which slot.json did not record`
            : ` ${replica.index} (pid ${replica.pid})`;
        options.log?.(`${how} ${name}${which}`);
      }
      return { replica, outcome };
    }),
  );
  const pumps = uniqueIdentities([...replicas.flatMap(pumpOf), ...slotLogPumps(slotDir)]);
  await Promise.all(pumps.map((pump) => endLogPump(pump, name, options)));
  if (record && !record.retired) {
    await writeSlot(slotDir, { ...record, retired: true, retiredAt: new Date().toISOString() });
  }
  return stopped;
}

/** Stops one replica (its process group) and waits for its log pump to end. */
export async function stopReplica(
  replica: ReplicaRecord,
  graceMs: number,
  options: { log?: (line: string) => void; signal?: AbortSignal } = {},
): Promise<StopOutcome> {
  const outcome = await stopProcessGroup(replica, graceMs, options.signal);
  for (const pump of pumpOf(replica)) await endLogPump(pump, 'replica', options);
  return outcome;
}

/** The replica's recorded log pump; none for a malformed entry (a record is not trusted with any pid). */
function pumpOf(replica: ReplicaRecord): ProcessIdentity[] {
  const pump = replica.pump;
  if (typeof pump !== 'object' || pump === null) return [];
  return Number.isSafeInteger(pump.pid) && pump.pid > 1 ? [pump] : [];
}

/** Waits for a log pump whose replica is gone to end by itself; kills it if it does not. */
async function endLogPump(
  pump: ProcessIdentity,
  name: string,
  options: { log?: (line: string) => void; signal?: AbortSignal; logPumpEndTimeoutMs?: number },
): Promise<void> {
  const timeoutMs = options.logPumpEndTimeoutMs ?? defaultLogPumpEndTimeoutMs;
  const outcome = await awaitProcessGroup(pump, timeoutMs, options.signal);
  if (outcome === 'killed') {
    options.log?.(
      `killed the log pump (pid ${pump.pid}) of a stopped ${name}: its output was still open ${formatDuration(timeoutMs)} on (a process the replica started may hold it); its last lines may be missing from its log`,
    );
  }
}

/** The index of a replica found running but not in slot.json (its number was never recorded). */
const unrecordedIndex = -1;

function uniqueIdentities<T extends ProcessIdentity>(processes: T[]): T[] {
  const seen = new Map<string, T>();
  for (const one of processes) seen.set(`${one.pid}:${one.startTime}`, one);
  return [...seen.values()];
}

/** The id provision gave the slot; a slot without one (not reported before a crash) gets the default. */
export function slotIdOf(ctx: ComponentCallContext, slot: SlotInfo): string {
  const id = slot.details?.slotId;
  return typeof id === 'string' && id !== '' ? id : `${ctx.component}-${ctx.migrationId}`;
}

/** The slot's directory: as provision reported it, else where provision puts it by default. */
export function slotDirOf(ctx: ComponentCallContext, slot: SlotInfo): string {
  const dir = slot.details?.slotDir;
  return typeof dir === 'string' && dir !== ''
    ? dir
    : ctx.stateDir.slotDir(ctx.environment, slotIdOf(ctx, slot));
}

/**
 * The replicas the layout recorded with the slot (retire stops them, observe looks at them); a
 * malformed entry is passed over rather than trusted with a pid or a port.
 */
export function recordedReplicas(slot: SlotInfo): ReplicaRecord[] {
  const replicas = slot.details?.replicas;
  if (!Array.isArray(replicas)) return [];
  return replicas.filter(
    (r): r is ReplicaRecord =>
      typeof r === 'object' &&
      r !== null &&
      Number.isSafeInteger(r.pid) &&
      r.pid > 0 &&
      Number.isSafeInteger(r.port),
  );
}
