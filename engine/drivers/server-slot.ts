/**
 * What the drivers of a stateful server per slot share (postgres-driver.ts, redis-driver.ts): the
 * slot's directory and the record of its server (in SlotInfo.details and a JSON file in that
 * directory), provision on a port of the pool, retire, observe by the recorded process and a TCP
 * probe, and the tail of the server's log. Each driver gives what differs: its settings, how its
 * server starts and stops, and how it copies data once (replicate).
 */
import { mkdir, open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { defaults } from '../../core/topology/types.js';
import { isAlive } from '../../platform/process-identity.js';
import { tcpProbe } from '../health/probes.js';
import { PortPool } from './port-pool.js';
import {
  type ComponentCallContext,
  type ComponentDriver,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from './types.js';

/** A server's port that does not accept a connection within this is `not_answering`. */
const connectTimeoutMs = 1_000;
const logTailLines = 10;
/** How much of the end of a log file its tail is read from: logs grow for as long as a server runs. */
const logTailBytes = 64 * 1024;

/** What a driver keeps of a slot's server, whatever else its record holds. */
export interface ServerSlotRecord {
  slotId: string;
  slotDir: string;
  port: number;
  pid: number;
  startTime: string | null;
}

/** Where a slot's server lives: the slot's directory and the port taken for it. */
export interface ServerPlace {
  slotId: string;
  slotDir: string;
  port: number;
}

export interface ServerPerSlotDriver<Settings, Kept extends ServerSlotRecord> {
  /** The server's name in logs and messages ("postgres", "redis-server"). */
  server: string;
  /** The record's file in the slot's directory ("cluster.json"). */
  recordFile: string;
  /** The server's log file in the slot's directory ("postgres.log"). */
  logFile: string;
  /** Where the servers' ports come from; share one with every driver that may provision at once. */
  ports?: PortPool;
  settings(ctx: ComponentCallContext): Promise<Settings>;
  /** Starts a new server in the slot (stopping and removing what an earlier attempt left). */
  start(settings: Settings, place: ServerPlace, options: DriverCallOptions): Promise<Kept>;
  /** Stops the slot's server if it runs. Idempotent. */
  stop(
    settings: Settings,
    slotDir: string,
    known: Kept | undefined,
    options: DriverCallOptions,
  ): Promise<unknown>;
  /** Where `from`'s data is now (a WAL position, a replication offset): what a copy must reach. */
  position(ctx: ComponentCallContext, from: SlotInfo, options: DriverCallOptions): Promise<string>;
  replication: NonNullable<ComponentDriver['replication']>;
}

/** A component driver running one server per slot, from what differs between such drivers. */
export function createServerPerSlotDriver<Settings, Kept extends ServerSlotRecord>(
  kind: ServerPerSlotDriver<Settings, Kept>,
): ComponentDriver {
  const ports = kind.ports ?? new PortPool();
  const known = async (ctx: ComponentCallContext, slot: SlotInfo): Promise<Kept | undefined> =>
    (recordOf(slot) as Kept | undefined) ?? readRecord<Kept>(slotDirOf(ctx, slot), kind.recordFile);
  return {
    async provision(ctx, slot, options) {
      options.signal.throwIfAborted();
      const settings = await kind.settings(ctx);
      const slotId = `${ctx.component}-${ctx.migrationId}`;
      const slotDir = ctx.stateDir.slotDir(ctx.environment, slotId);
      await mkdir(slotDir, { recursive: true });
      const [port] = await ports.take(1, ctx.reservedPorts);
      const record = await kind.start(settings, { slotId, slotDir, port: port as number }, options);
      return {
        component: ctx.component,
        slot,
        version: ctx.spec.version,
        addresses: [`127.0.0.1:${record.port}`],
        details: { ...(record as ServerSlotRecord) },
      };
    },

    // A copy once: `to` follows `from`, catches up with where `from` is now, is promoted, and stops following.
    async replicate(ctx, from, to, options) {
      const deadline = Date.now() + (ctx.spec.replicate?.timeout ?? defaults.replicateTimeoutMs);
      await kind.replication.follow(ctx, from, to, options);
      const position = await kind.position(ctx, from, options);
      await kind.replication.catchUp(ctx, from, to, position, deadline, options);
      await kind.replication.promote(ctx, to, options);
      await kind.replication.stop(ctx, from, to, options);
    },

    async drain() {
      // Clients leave with the traffic; the server serves until retired.
    },

    async retire(ctx, slot, options) {
      options.signal.throwIfAborted();
      const settings = await kind.settings(ctx);
      await kind.stop(settings, slotDirOf(ctx, slot), await known(ctx, slot), options);
    },

    async observe(ctx, slot, options) {
      const record = await known(ctx, slot);
      if (!record)
        return [
          { address: slot.addresses[0] ?? null, state: 'unknown', detail: `no ${kind.server} recorded` },
        ];
      const address = `127.0.0.1:${record.port}`;
      const seen = { address, pid: record.pid };
      if (!serverAlive(record)) return [{ ...seen, state: 'not_running', detail: 'exited' }];
      const probe = await tcpProbe(address).run(connectTimeoutMs, options.signal);
      if (!probe) return [{ ...seen, state: 'unknown', detail: 'observation stopped' }];
      if (probe.ok) return [{ ...seen, state: 'running' }];
      return [{ ...seen, state: 'not_answering', detail: probe.summary }];
    },

    async logs(ctx, slot, lines) {
      const file = path.join(slotDirOf(ctx, slot), kind.logFile);
      return [{ replica: 0, name: kind.server, lines: await logTail(file, lines) }];
    },

    replication: kind.replication,
  };
}

/** The slot's directory: as recorded, else where provision puts it. */
export function slotDirOf(ctx: ComponentCallContext, slot: SlotInfo): string {
  const recorded = slot.details?.slotDir;
  if (typeof recorded === 'string') return recorded;
  return ctx.stateDir.slotDir(
    ctx.environment,
    String(slot.details?.slotId ?? `${slot.component}-${ctx.migrationId}`),
  );
}

/** The server's record kept in the slot's details, when they hold one. */
export function recordOf(slot: SlotInfo): ServerSlotRecord | undefined {
  const d = slot.details;
  if (!d || typeof d.pid !== 'number' || typeof d.port !== 'number' || typeof d.slotDir !== 'string')
    return undefined;
  return d as unknown as ServerSlotRecord;
}

/** The record a driver wrote in the slot's directory, if any. */
export async function readRecord<Kept>(slotDir: string, file: string): Promise<Kept | undefined> {
  try {
    return JSON.parse(await readFile(path.join(slotDir, file), 'utf8')) as Kept;
  } catch {
    return undefined;
  }
}

export function serverAlive(record: ServerSlotRecord): boolean {
  return isAlive({ pid: record.pid, startTime: record.startTime });
}

/** The last lines a server (or a replica) wrote to its log file, read from its last 64 KiB at most. */
export async function logTail(file: string, lines = logTailLines): Promise<string[]> {
  const text = await readEnd(file, logTailBytes).catch(() => '');
  return text.split('\n').filter(Boolean).slice(-lines);
}

/** The end of a file, from its first whole line within the last `bytes` bytes. */
async function readEnd(file: string, bytes: number): Promise<string> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    const start = Math.max(0, size - bytes);
    const buffer = Buffer.alloc(size - start);
    await handle.read(buffer, 0, buffer.length, start);
    const text = buffer.toString('utf8');
    return start === 0 ? text : text.slice(text.indexOf('\n') + 1);
  } finally {
    await handle.close();
  }
}

/** The port of the slot's server (`what` names the server in the message when none is recorded). */
export function portOf(slot: SlotInfo, what: string): number {
  const port = Number(slot.details?.port ?? slot.addresses[0]?.split(':').pop());
  if (!Number.isInteger(port) || port <= 0)
    throw new PermanentDriverError(`the ${slot.slot} slot of ${slot.component} records no ${what} port`);
  return port;
}
