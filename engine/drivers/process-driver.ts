/**
 * The process driver: components realised as local processes, one per replica, each on a loopback
 * port of its own (`PORT`), started detached so they outlive the cutover process that started them.
 *
 * Contract (for its docs page, docs/drivers/process.md):
 *
 * - A slot is `<component>-<migrationId>` (`details.slotId`), living in
 *   `<stateDir>/environments/<environment>/slots/<slotId>/`: `slot.json` (the processes: pid, start
 *   time, port, log, log pump), `replica-<i>.log` (stdout and stderr of replica i, appended across
 *   restarts, written masked by its log pump: process-spawn.ts) and `data/`, the slot's data
 *   directory (`CUTOVER_DATA_DIR`).
 * - provision starts `run.command` (argv, no shell) `replicas` times, in `run.cwd` (relative to the
 *   topology file), each in its own process group with SIGPIPE ignored, its output through its log
 *   pump (a process of its own, in the slot directory), with cutover's environment, the component's `env`,
 *   `PORT`, `HOST` (the driver's `address`, default 127.0.0.1) and CUTOVER_ENVIRONMENT, CUTOVER_COMPONENT, CUTOVER_SLOT,
 *   CUTOVER_SLOT_ID, CUTOVER_VERSION, CUTOVER_REPLICA, CUTOVER_DATA_DIR. A replica that exits within
 *   the start-up grace (300 ms unless the driver is made with another) is a permanent failure quoting its log. Provisioning a slot again stops the
 *   processes the earlier attempt recorded (and, on Linux, one it started but had not recorded when
 *   it was killed: found by CUTOVER_DATA_DIR), then starts afresh.
 * - replicate runs `replicate.command` (argv, no shell; CUTOVER_FROM_DATA_DIR, CUTOVER_DATA_DIR,
 *   CUTOVER_FROM_SLOT_ID, CUTOVER_SLOT_ID; exit 75 retried, other failures permanent) or else copies
 *   `data/<replicate.dataDir>` of blue into green's (`.` for all of it). A copy is of files as they
 *   are while blue runs: for state that must be consistent, use a command.
 * - drain does nothing: the router drains traffic, the processes serve until retired.
 * - retire sends SIGTERM to each replica's process group (recorded or found as above), SIGKILL after
 *   the driver's `stopTimeout`, waits until they are gone and their log pumps have written their
 *   last lines and ended (killed 10 s on if a process outside the group holds a replica's output),
 *   and marks the slot retired; the directory and logs stay, and nothing writes in it any more.
 * - observe reports each replica: running (pid alive, port accepting), not_answering, not_running.
 * - logs gives the last lines of each replica's log, named by its path (quoted after a failed gate).
 * - restart (a restart in place, process-restart.ts) starts again the live slot's replicas that are
 *   down, on their recorded ports if free, else new ones, appending to their logs and slot.json.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { formatDuration } from '../../core/topology/duration.js';
import { defaults } from '../../core/topology/types.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import { componentEnv } from './component-env.js';
import { exitCodeRetry } from './exec-driver.js';
import { PortPool } from './port-pool.js';
import { runCommand } from './process-command.js';
import { copyDataDir } from './process-data-dir.js';
import { observeProcessSlot } from './process-observe.js';
import { dataDirReplicator } from './process-replication.js';
import { restartProcessSlot } from './process-restart.js';
import {
  readSlot,
  recordedReplicas,
  replicaAddress,
  slotDirOf,
  slotIdOf,
  stopSlotProcesses,
} from './process-slot.js';
import { defaultStartupGraceMs, startReplicas } from './process-start.js';
import { logTail } from './server-slot.js';
import { spawnFailure } from './spawn-failure.js';
import {
  type ComponentCallContext,
  type ComponentDriver,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from './types.js';

export { readSlot, stopSlotProcesses } from './process-slot.js';

export interface ProcessDriverOptions {
  /** A replica that exits within this long of starting fails the call (default 300 ms). */
  startupGraceMs?: number;
  /** Where its replicas' ports come from; share one with every driver that may provision at the same time. */
  ports?: PortPool;
}

export function createProcessDriver(driverOptions: ProcessDriverOptions = {}): ComponentDriver {
  const startupGraceMs = driverOptions.startupGraceMs ?? defaultStartupGraceMs;
  const ports = driverOptions.ports ?? new PortPool();
  return {
    async provision(ctx, slot, options) {
      options.signal.throwIfAborted();
      const stopTimeoutMs = stopTimeoutOf(ctx);
      const slotId = `${ctx.component}-${ctx.migrationId}`;
      const slotDir = ctx.stateDir.slotDir(ctx.environment, slotId);
      if (await readSlot(slotDir)) {
        options.log(`stopping what an earlier attempt started in slot ${slotId}`);
        await stopSlotProcesses(slotDir, { stopTimeoutMs, log: options.log, signal: options.signal });
      }
      const replicas = await startReplicas(
        ctx,
        { slot, slotId, slotDir, stopTimeoutMs, startupGraceMs },
        ports,
        options,
      );
      return {
        component: ctx.component,
        slot,
        version: ctx.spec.version,
        addresses: replicas.map(replicaAddress),
        details: { slotId, slotDir, replicas },
      };
    },

    async replicate(ctx, from, to, options) {
      options.signal.throwIfAborted();
      const fromDir = slotDirOf(ctx, from);
      const toDir = slotDirOf(ctx, to);
      const replicate = ctx.spec.replicate;
      if (replicate?.command) {
        await replicateByCommand(ctx, { from, to, fromDir, toDir, command: replicate.command }, options);
      } else if (replicate?.dataDir !== undefined) {
        await copyDataDir(fromDir, toDir, replicate.dataDir, options);
      } else {
        options.log(`${ctx.component}: no replicate command or dataDir; nothing to copy`);
      }
    },

    async drain() {
      // The router drains traffic; the processes keep serving until retire stops them.
    },

    async retire(ctx, slot, options) {
      options.signal.throwIfAborted();
      await stopSlotProcesses(slotDirOf(ctx, slot), {
        stopTimeoutMs: stopTimeoutOf(ctx),
        replicas: recordedReplicas(slot),
        log: options.log,
        signal: options.signal,
      });
    },

    async restart(ctx, slot, options) {
      return restartProcessSlot(
        ctx,
        slot,
        { stopTimeoutMs: stopTimeoutOf(ctx), startupGraceMs, ports },
        options,
      );
    },

    // Each replica's own log, named: after a failed gate, where to read the rest.
    async logs(ctx, slot, lines) {
      const record = await readSlot(slotDirOf(ctx, slot));
      const replicas = record?.replicas ?? recordedReplicas(slot);
      return Promise.all(
        replicas.map(async (replica) => ({
          replica: replica.index,
          name: replica.log,
          lines: await logTail(replica.log, lines),
        })),
      );
    },

    observe: observeProcessSlot,
    replication: dataDirReplicator,
  };
}

function stopTimeoutOf(ctx: ComponentCallContext): number {
  if (ctx.driver.type !== 'process') {
    throw new PermanentDriverError(
      `component ${ctx.component}: the process driver got a ${ctx.driver.type} driver`,
    );
  }
  return ctx.driver.stopTimeout;
}

interface ReplicateCall {
  from: SlotInfo;
  to: SlotInfo;
  fromDir: string;
  toDir: string;
  command: string[];
}

async function replicateByCommand(
  ctx: ComponentCallContext,
  call: ReplicateCall,
  options: DriverCallOptions,
): Promise<void> {
  const cwd = path.resolve(ctx.baseDir, ctx.spec.run?.cwd ?? '.');
  const timeoutMs = ctx.spec.replicate?.timeout ?? defaults.replicateTimeoutMs;
  const env = {
    ...inheritedEnv(),
    ...componentEnv(ctx),
    CUTOVER_ENVIRONMENT: ctx.environment,
    CUTOVER_COMPONENT: ctx.component,
    CUTOVER_VERSION: call.to.version,
    CUTOVER_FROM_SLOT_ID: slotIdOf(ctx, call.from),
    CUTOVER_FROM_DATA_DIR: path.join(call.fromDir, 'data'),
    CUTOVER_SLOT_ID: slotIdOf(ctx, call.to),
    CUTOVER_DATA_DIR: path.join(call.toDir, 'data'),
  };
  await mkdir(env.CUTOVER_DATA_DIR, { recursive: true });
  const prefix = `[replicate ${ctx.component}] `;
  const run = await runCommand({ argv: call.command, cwd, env, timeoutMs, prefix }, options);
  const name = `replicate command ${call.command.join(' ')}`;
  const tail =
    run.stderrTail.length > 0 ? `; last lines of stderr:\n${run.stderrTail.join('\n')}` : '; no stderr';
  if (run.stopped === 'abort') {
    throw options.signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
  }
  if (run.stopped === 'timeout')
    throw new Error(`${name} timed out after ${formatDuration(timeoutMs)}${tail}`);
  if (run.spawnError)
    throw new PermanentDriverError(`cannot run ${name}: ${spawnFailure(run.spawnError, cwd)}`);
  if (run.exitCode === exitCodeRetry) {
    throw new Error(`${name} exited with code ${exitCodeRetry} (EX_TEMPFAIL: will retry)${tail}`);
  }
  if (run.exitCode !== 0) {
    const how =
      run.exitCode === null ? `was killed by ${run.exitSignal}` : `exited with code ${run.exitCode}`;
    throw new PermanentDriverError(`${name} ${how}${tail}`);
  }
}
