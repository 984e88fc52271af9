import type { ChildProcess } from 'node:child_process';
import { mkdir, open, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CutoverError } from '../../core/errors.js';
import { redactorOf } from '../../core/redact.js';
import { formatDuration } from '../../core/topology/duration.js';
import { isSecretRef } from '../../core/topology/secret-refs.js';
import { processIdentity } from '../../platform/process-identity.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import { componentEnv } from './component-env.js';
import type { PortPool } from './port-pool.js';
import {
  loopbackAddress,
  type ReplicaRecord,
  replicaAddress,
  type SlotRecord,
  stopSlotProcesses,
  writeSlot,
} from './process-slot.js';
import { type LogPump, spawnReplica } from './process-spawn.js';
import { spawnFailure } from './spawn-failure.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type Slot,
} from './types.js';

/** How long a started replica must keep running to count as started, unless the driver is told otherwise. */
export const defaultStartupGraceMs = 300;
/**
 * After a replica exited, how long its log pump may take to write its last lines before they are
 * quoted: the pump, started at a lower priority, may still be starting on a busy machine.
 */
const logPumpDrainTimeoutMs = 10_000;
const logTailLines = 10;

export interface SlotTarget {
  slot: Slot;
  slotId: string;
  slotDir: string;
  stopTimeoutMs: number;
  /** A replica that exits within this long of starting is a permanent failure. */
  startupGraceMs: number;
}

/** A replica started by this call, with how it exited if it did. */
export interface Started {
  record: ReplicaRecord;
  logOffset: number;
  exit?: { code: number | null; signal: NodeJS.Signals | null };
  exited: Promise<void>;
  /** What writes its output to its log, masked (process-spawn.ts); none for a replica given no secret. */
  pump?: LogPump;
}

/** The component's run.command and the directory it runs in, or a permanent error when either is missing. */
export async function runSpec(ctx: ComponentCallContext): Promise<{ command: string[]; cwd: string }> {
  const command = ctx.spec.run?.command ?? [];
  if (command.length === 0) {
    throw new PermanentDriverError(`component ${ctx.component} has no run.command for the process driver`);
  }
  const cwd = path.resolve(ctx.baseDir, ctx.spec.run?.cwd ?? '.');
  if (!(await stat(cwd).catch(() => undefined))?.isDirectory()) {
    throw new PermanentDriverError(`working directory ${cwd} of ${ctx.component} does not exist`);
  }
  return { command, cwd };
}

/**
 * Starts the component's replicas in the slot, recording each in slot.json as it starts, and checks
 * that none exits within target.startupGraceMs. On any failure, what it started is stopped before it throws.
 */
export async function startReplicas(
  ctx: ComponentCallContext,
  target: SlotTarget,
  ports: PortPool,
  options: DriverCallOptions,
): Promise<ReplicaRecord[]> {
  const { command, cwd } = await runSpec(ctx);
  const dataDir = path.join(target.slotDir, 'data');
  await mkdir(dataDir, { recursive: true });
  const record = slotRecord(ctx, target, { command, cwd, startedAt: new Date().toISOString() }, []);
  await writeSlot(target.slotDir, record);

  const started: Started[] = [];
  try {
    const chosen = await ports.take(ctx.spec.replicas, ctx.reservedPorts);
    for (const [index, port] of chosen.entries()) {
      options.signal.throwIfAborted();
      const launch = replicaLaunch(ctx, target, { command, cwd, index, port });
      const replica = await startReplica(launch, ctx.component);
      started.push(replica);
      record.replicas.push(replica.record);
      await writeSlot(target.slotDir, record);
      options.log(
        `started ${ctx.component} replica ${index} (pid ${replica.record.pid}) on ${replicaAddress(replica.record)}`,
      );
    }
    await checkStartup(ctx.component, command, started, target.startupGraceMs, options.signal);
    return record.replicas;
  } catch (error) {
    await stopSlotProcesses(target.slotDir, { stopTimeoutMs: target.stopTimeoutMs, log: options.log });
    throw error;
  }
}

export interface ReplicaLaunch {
  command: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** The names of the variables of `env` whose values are secrets: masked in the replica's log. */
  secretKeys?: string[];
  log: string;
  index: number;
  port: number;
  /** The address it listens on (its HOST); absent, loopback. */
  host?: string;
}

/** The record of a slot (`slot.json`): what runs in it and how it was started. */
export function slotRecord(
  ctx: ComponentCallContext,
  target: SlotTarget,
  run: { command: string[]; cwd: string; startedAt: string },
  replicas: ReplicaRecord[],
): SlotRecord {
  return {
    formatVersion: 1,
    environment: ctx.environment,
    component: ctx.component,
    slot: target.slot,
    slotId: target.slotId,
    version: ctx.spec.version,
    command: run.command,
    cwd: run.cwd,
    startedAt: run.startedAt,
    replicas,
  };
}

/** Replica `index` of the slot on `port`: its environment and log file, the same at every start. */
export function replicaLaunch(
  ctx: ComponentCallContext,
  target: SlotTarget,
  at: { command: string[]; cwd: string; index: number; port: number },
): ReplicaLaunch {
  const host = processAddressOf(ctx);
  const env = {
    ...inheritedEnv(),
    ...componentEnv(ctx),
    PORT: String(at.port),
    HOST: host,
    CUTOVER_ENVIRONMENT: ctx.environment,
    CUTOVER_COMPONENT: ctx.component,
    CUTOVER_SLOT: target.slot,
    CUTOVER_SLOT_ID: target.slotId,
    CUTOVER_VERSION: ctx.spec.version,
    CUTOVER_REPLICA: String(at.index),
    CUTOVER_DATA_DIR: path.join(target.slotDir, 'data'),
  };
  const secretKeys = Object.keys(ctx.spec.env).filter((key) => isSecretRef(ctx.spec.env[key]));
  return { ...at, host, env, secretKeys, log: path.join(target.slotDir, `replica-${at.index}.log`) };
}

/** Where the component's replicas listen and are reached: its process driver's `address`, else loopback. */
export function processAddressOf(ctx: ComponentCallContext): string {
  return (ctx.driver.type === 'process' ? ctx.driver.address : undefined) ?? loopbackAddress;
}

/**
 * Spawns one replica detached, in its own process group, its stdout and stderr appended to its log
 * file through its log pump, which masks its secrets (process-spawn.ts): it holds no pipe to
 * cutover and is not waited for, so it runs on when cutover exits.
 */
export async function startReplica(launch: ReplicaLaunch, component: string): Promise<Started> {
  // 0600: what a replica prints is its own.
  const handle = await open(launch.log, 'a', 0o600);
  const secrets = (launch.secretKeys ?? []).map((key) => launch.env[key] ?? '');
  let spawned: { child: ChildProcess; pump?: LogPump } | undefined;
  let spawnError: Promise<Error> | undefined;
  let replica: Started | undefined;
  try {
    const where = replicaAddress(launch.host ? { address: launch.host, port: launch.port } : launch);
    const header = `--- ${new Date().toISOString()} cutover: starting ${component} replica ${launch.index} on ${where}: ${launch.command.join(' ')}\n`;
    await handle.write(redactorOf(secrets).text(header));
    const logOffset = (await handle.stat()).size;
    try {
      spawned = await spawnReplica({ ...launch, secrets, logFd: handle.fd });
    } catch (error) {
      if (error instanceof CutoverError) throw error; // no log pump to start: cutover's fault
      spawnError = Promise.resolve(error as Error);
    }
    if (spawned) {
      const { child, pump } = spawned;
      // Emitted on the next tick when the spawn failed: listen before anything else is awaited.
      spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
      if (child.pid !== undefined) {
        // Its identity and its exit are taken before anything is awaited: a replica that exits at
        // once (a shell, in milliseconds) is reaped on the next turn of the event loop, and an 'exit'
        // with no listener yet was lost, so the start-up check waited out its grace and passed.
        const started: Started = {
          record: {
            ...processIdentity(child.pid),
            index: launch.index,
            port: launch.port,
            ...(launch.host !== undefined && launch.host !== loopbackAddress ? { address: launch.host } : {}),
            log: launch.log,
            ...(pump ? { pump: pump.identity } : {}),
          },
          logOffset,
          ...(pump ? { pump } : {}),
          exited: new Promise((resolve) => {
            child.once('exit', (code, signal) => {
              started.exit = { code, signal };
              resolve();
            });
          }),
        };
        replica = started;
        child.unref();
      }
    }
  } finally {
    await handle.close();
  }
  if (replica === undefined) {
    const error = await (spawnError as Promise<Error>);
    throw new PermanentDriverError(
      `cannot run ${launch.command.join(' ')}: ${spawnFailure(error, launch.cwd)}`,
    );
  }
  return replica;
}

/**
 * Waits out the start-up grace of the replicas just started: one that exits within it fails the
 * start (quoting its log once its pump wrote it), and so does a log pump that failed (not one that
 * ended with its replica's output: a replica may close its stdout and stderr).
 */
export async function checkStartup(
  component: string,
  command: string[],
  started: Started[],
  graceMs: number,
  signal: AbortSignal,
): Promise<void> {
  await Promise.race([sleep(graceMs, undefined, { signal }), ...started.map((s) => s.exited)]);
  const failed = started.find((s) => s.exit);
  if (failed) throw await startupFailure(component, command, failed, graceMs);
  const broken = started.find((s) => s.pump?.exit && s.pump.exit.code !== 0);
  if (broken) {
    const { code, signal: killedBy } = broken.pump?.exit ?? {};
    throw new PermanentDriverError(
      `the log pump of ${component} replica ${broken.record.index} ${code === null ? `was killed by ${killedBy}` : `exited with code ${code}`} as it started, so the replica's output would not be logged${await logTail(broken)}`,
    );
  }
}

export async function startupFailure(
  component: string,
  command: string[],
  failed: Started,
  graceMs: number,
): Promise<Error> {
  const { code, signal } = failed.exit ?? { code: null, signal: null };
  const how = code === null ? `was killed by ${signal}` : `exited with code ${code}`;
  // Its last lines are in its log once its pump, which ends with the replica's output, wrote them.
  const drained = new AbortController();
  await Promise.race([
    failed.pump?.exited ?? Promise.resolve(),
    sleep(logPumpDrainTimeoutMs, undefined, { signal: drained.signal }).catch(() => undefined),
  ]);
  drained.abort();
  return new PermanentDriverError(
    `${component} replica ${failed.record.index} (${command.join(' ')}) ${how} within ${formatDuration(graceMs)} of starting${await logTail(failed)}`,
  );
}

/** "; last lines of <log>:\n…" of what the replica wrote since it started, or that it wrote nothing. */
async function logTail(replica: Started): Promise<string> {
  const { log } = replica.record;
  const text = await readFile(log)
    .then((buffer) => buffer.subarray(replica.logOffset).toString('utf8'))
    .catch(() => '');
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  return lines.length > 0
    ? `; last lines of ${log}:\n${lines.slice(-logTailLines).join('\n')}`
    : `; nothing in ${log}`;
}
