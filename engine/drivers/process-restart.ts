/**
 * Restart in place for the process driver: the replicas of the live slot that are down are started
 * again, in the same slot, each on its recorded port if that port is free, else on a new one; the
 * replicas that run are left alone. Only for a component on which no traffic depends (the plan
 * decides that), so a new port breaks no route.
 */
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import type { PortPool } from './port-pool.js';
import { observeReplica } from './process-observe.js';
import {
  type ReplicaRecord,
  readSlot,
  recordedReplicas,
  replicaAddress,
  slotDirOf,
  slotIdOf,
  stopReplica,
  writeSlot,
} from './process-slot.js';
import {
  checkStartup,
  processAddressOf,
  replicaLaunch,
  runSpec,
  type SlotTarget,
  type Started,
  slotRecord,
  startReplica,
} from './process-start.js';
import type { ComponentCallContext, DriverCallOptions, SlotInfo } from './types.js';

/**
 * Idempotent and resumable: each call looks again at what runs. A replica alive but not answering
 * is stopped first (it holds its port and serves no one). The slot's own record (`slot.json`) is
 * the newest word on its processes (a restart a rollback left in place is there, not in the
 * layout), so it is read first and the layout's replicas are the fallback. On a start-up failure,
 * what this call started is stopped again and the replicas that ran are left running.
 */
export async function restartProcessSlot(
  ctx: ComponentCallContext,
  slot: SlotInfo,
  settings: { stopTimeoutMs: number; startupGraceMs: number; ports: PortPool },
  options: DriverCallOptions,
): Promise<SlotInfo> {
  const { stopTimeoutMs, startupGraceMs, ports } = settings;
  options.signal.throwIfAborted();
  const { command, cwd } = await runSpec(ctx);
  const slotDir = slotDirOf(ctx, slot);
  const record = await readSlot(slotDir);
  const target: SlotTarget = {
    slot: record?.slot ?? slot.slot,
    slotId: slotIdOf(ctx, slot),
    slotDir,
    stopTimeoutMs,
    startupGraceMs,
  };
  await mkdir(path.join(slotDir, 'data'), { recursive: true });
  const known = latestByIndex(record?.replicas.length ? record.replicas : recordedReplicas(slot));

  const kept: ReplicaRecord[] = [];
  const down: { index: number; port: number | undefined }[] = [];
  for (let index = 0; index < ctx.spec.replicas; index++) {
    const replica = known.get(index);
    const seen = replica ? await observeReplica(replica, options.signal) : undefined;
    options.signal.throwIfAborted();
    if (replica && seen?.state === 'running') {
      kept.push(replica);
      continue;
    }
    if (replica && seen?.state === 'not_answering') {
      options.log(`stopping ${ctx.component} replica ${index} (pid ${replica.pid}): alive but not answering`);
      await stopReplica(replica, stopTimeoutMs, options);
    }
    down.push({ index, port: replica?.port });
  }
  if (down.length === 0) options.log(`every replica of ${ctx.component} runs: nothing to restart`);

  const started: Started[] = [];
  const replicas = [...kept];
  const startedAt = record?.startedAt ?? new Date().toISOString();
  const save = () =>
    writeSlot(
      slotDir,
      slotRecord(
        ctx,
        target,
        { command, cwd, startedAt },
        [...replicas].sort((a, b) => a.index - b.index),
      ),
    );
  try {
    for (const { index, port: recorded } of down) {
      options.signal.throwIfAborted();
      const port =
        recorded !== undefined && (await portIsFree(recorded, processAddressOf(ctx)))
          ? recorded
          : await newPort(ports, ctx.reservedPorts);
      const replica = await startReplica(
        replicaLaunch(ctx, target, { command, cwd, index, port }),
        ctx.component,
      );
      started.push(replica);
      replicas.push(replica.record);
      // Recorded as soon as it runs, so whoever comes next finds it (as startReplicas does).
      await save();
      const moved = recorded !== undefined && recorded !== port ? ` (port ${recorded} was taken)` : '';
      options.log(
        `restarted ${ctx.component} replica ${index} in place (pid ${replica.record.pid}) on ${replicaAddress(replica.record)}${moved}`,
      );
    }
    if (started.length > 0) {
      await checkStartup(ctx.component, command, started, startupGraceMs, options.signal);
    }
  } catch (error) {
    await Promise.all(started.map((s) => stopReplica(s.record, stopTimeoutMs, { log: options.log })));
    const startedPids = new Set(started.map((s) => s.record.pid));
    replicas.splice(0, replicas.length, ...replicas.filter((r) => !startedPids.has(r.pid)));
    await save();
    throw error;
  }
  await save();
  const sorted = [...replicas].sort((a, b) => a.index - b.index);
  return {
    ...slot,
    addresses: sorted.map(replicaAddress),
    details: { ...slot.details, slotId: target.slotId, slotDir, replicas: sorted },
  };
}

/** The newest record of each replica index (a restart appends after the one it replaces). */
function latestByIndex(replicas: readonly ReplicaRecord[]): Map<number, ReplicaRecord> {
  const out = new Map<number, ReplicaRecord>();
  for (const replica of replicas) out.set(replica.index, replica);
  return out;
}

/** Whether nothing listens on the port at `host` now (a moment later someone may; start-up says so). */
async function portIsFree(port: number, host: string): Promise<boolean> {
  const server = createServer();
  const free = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, host, () => resolve(true));
  });
  if (free) await new Promise((resolve) => server.close(resolve));
  return free;
}

async function newPort(ports: PortPool, reserved?: ReadonlySet<number>): Promise<number> {
  const [port] = await ports.take(1, reserved);
  return port as number;
}
