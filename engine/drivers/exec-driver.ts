/**
 * The exec driver: components realised by your own executables, one per stage (how Terraform,
 * kubectl, Ansible or a cloud CLI plug into cutover).
 *
 * Contract (copied into docs/drivers/exec.md; change both together):
 *
 * - Files. For a component on a driver `{ type: exec, dir, timeout }`, cutover runs the executable
 *   `<dir>/<stage>` (dir relative to the topology file) for each stage: `provision`, `replicate`,
 *   `drain`, `retire`. No arguments, no shell; the working directory is `dir`. A missing file means
 *   "nothing to do for this stage": the stage succeeds and the log says `no <stage> script in <dir>;
 *   skipped`. A missing `dir`, or a file that is not executable, is a permanent error.
 * - Input on stdin: one JSON object, `{ environment, migrationId, component, stage, slot, slotId,
 *   version, spec, timeoutMs }` plus `from` and `to` (the slots, for replicate) or `slotInfo` (the
 *   slot, for drain and retire) and, for drain, `drainTimeoutMs`. `spec` is the component as
 *   normalised (durations in ms); `timeoutMs` is the script's time limit; slots are what provision
 *   returned: `{ component, slot, version, addresses, details }`. In a migration, `dependencies`
 *   gives each component of `spec.dependsOn` as `{ slot, addresses }`: the slot this one talks to
 *   (green for green where the dependency is replaced too, else the live slot).
 * - Input in the environment: cutover's own environment, the component's `env` (references to
 *   dependencies written with those addresses), and
 *   CUTOVER_ENVIRONMENT, CUTOVER_MIGRATION_ID, CUTOVER_COMPONENT, CUTOVER_STAGE, CUTOVER_SLOT (blue or
 *   green), CUTOVER_SLOT_ID, CUTOVER_VERSION, CUTOVER_STATE_DIR (absolute), CUTOVER_TIMEOUT_MS (the
 *   script's time limit); for replicate CUTOVER_FROM_SLOT_ID (the slot copied from; CUTOVER_SLOT_ID
 *   is the slot copied into); for drain CUTOVER_DRAIN_TIMEOUT_MS (how long the routes allow).
 * - Slot ids. CUTOVER_SLOT_ID names one slot for its whole life: `<component>-<migrationId>` for the
 *   slot a migration provisions, kept in the slot's `details.slotId` and passed again to replicate,
 *   drain and retire. Use it to name what you create.
 * - Output on stdout: one JSON object, or nothing (= `{}`). Provision may print
 *   `{ "addresses": ["host:port", …], "details": { … } }`; addresses are what health checks and
 *   routes use, details come back to later stages as they are (cutover adds `slotId`). Anything
 *   that is not a JSON object is a permanent error quoting the first 200 characters.
 * - stderr: every line goes to the migration log as it arrives, prefixed `[<stage> <component>] `.
 * - Exit status: 0 is success; 75 (EX_TEMPFAIL) is a transient failure that cutover retries with
 *   backoff; anything else, or death by a signal, is a permanent failure (the migration rolls back).
 *   Both messages carry the exit code and the last 10 lines of stderr.
 * - Time limit: the driver's `timeout` (default 5m) for every stage. On timeout, or when the
 *   migration is cancelled, cutover sends SIGTERM to the script's process group (everything it
 *   started that stayed in the group), then SIGKILL 2 s later. A timeout is retried; a cancel is not.
 * - drain: the script decides when the slot is drained, ideally within CUTOVER_DRAIN_TIMEOUT_MS (0
 *   when no route sends the component traffic); no script means drained at once. retire must be
 *   idempotent: retiring a slot that is gone succeeds.
 * - Every stage may run more than once (after a retry or a restart of cutover): make each one
 *   idempotent. Background processes a script leaves behind should redirect their output, or cutover
 *   stops waiting for it 0.5 s after the script exits.
 * - observe (optional, read-only): given the live slot as for retire, prints `{ "replicas":
 *   [{ "address": "host:port" | null, "state": "running" | "not_running" | "not_answering" |
 *   "unknown", "detail": "…" }] }`. `not_running` or `not_answering` is drift, which the next
 *   migration repairs. Without the script, every replica is `unknown` (never drift).
 */
import { constants as fsConstants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ObservedReplica, ReplicaState } from '../../core/observed.js';
import { formatDuration } from '../../core/topology/duration.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import { componentEnv } from './component-env.js';
import { maxStdoutBytes, runScript, type ScriptRun } from './run-script.js';
import {
  type ComponentCallContext,
  type ComponentDriver,
  type DriverCallOptions,
  PermanentDriverError,
  type Slot,
  type SlotInfo,
} from './types.js';

export type ExecStage = 'provision' | 'replicate' | 'drain' | 'retire' | 'observe';

/** EX_TEMPFAIL from sysexits.h: "try again later". */
export const exitCodeRetry = 75;
const quotedStdoutChars = 200;

/** One run of a stage script: the slot it concerns and what it is told. */
interface StageCall {
  stage: ExecStage;
  slot: Slot;
  slotId: string;
  version: string;
  timeoutMs: number;
  /** Extra fields of the stdin context (from/to, slotInfo, drainTimeoutMs). */
  context: Record<string, unknown>;
  env?: Record<string, string>;
}

export function createExecDriver(): ComponentDriver {
  return {
    async provision(ctx, slot, options) {
      const slotId = `${ctx.component}-${ctx.migrationId}`;
      const call = { stage: 'provision', slot, slotId, version: ctx.spec.version, context: {} } as const;
      const output = await runStage(ctx, { ...call, timeoutMs: execTimeoutMs(ctx) }, options);
      const { addresses, details } = provisionOutput(output);
      return {
        component: ctx.component,
        slot,
        version: ctx.spec.version,
        addresses,
        details: { ...details, slotId },
      };
    },
    async replicate(ctx, from, to, options) {
      await runStage(
        ctx,
        {
          stage: 'replicate',
          slot: to.slot,
          slotId: slotIdOf(ctx, to),
          version: to.version,
          timeoutMs: execTimeoutMs(ctx),
          context: { from, to },
          env: { CUTOVER_FROM_SLOT_ID: slotIdOf(ctx, from) },
        },
        options,
      );
    },
    async drain(ctx, slotInfo, drainTimeoutMs, options) {
      const call = slotCall(ctx, 'drain', slotInfo);
      call.context.drainTimeoutMs = drainTimeoutMs;
      call.env = { CUTOVER_DRAIN_TIMEOUT_MS: String(drainTimeoutMs) };
      await runStage(ctx, call, options);
    },
    async retire(ctx, slotInfo, options) {
      await runStage(ctx, slotCall(ctx, 'retire', slotInfo), options);
    },
    // Without an observe script nothing is known, and unknown is never drift.
    async observe(ctx, slotInfo, options) {
      const dir = path.resolve(ctx.baseDir, execSpec(ctx).dir);
      if (!(await findScript(dir, path.join(dir, 'observe')))) {
        const detail = `no observe script in ${dir}`;
        const unknown = (address: string | null) => ({ address, state: 'unknown' as const, detail });
        return slotInfo.addresses.length > 0 ? slotInfo.addresses.map(unknown) : [unknown(null)];
      }
      return observeOutput(await runStage(ctx, slotCall(ctx, 'observe', slotInfo), options));
    },
  };
}

const replicaStates: readonly ReplicaState[] = ['running', 'not_running', 'not_answering', 'unknown'];

/** `{ "replicas": [{ "address": "host:port" | null, "state": "running", "detail": "…" }] }`. */
function observeOutput(output: Record<string, unknown>): ObservedReplica[] {
  const { replicas } = output;
  const bad = (why: string) =>
    new PermanentDriverError(`observe script printed ${why}; expected {"replicas": [{"address", "state"}]}`);
  if (!Array.isArray(replicas)) throw bad('no "replicas" list');
  return replicas.map((r: unknown, i) => {
    if (!isPlainObject(r)) throw bad(`replicas[${i}] that is not an object`);
    const { address = null, state, detail } = r;
    if (address !== null && typeof address !== 'string')
      throw bad(`replicas[${i}].address that is not a string`);
    if (!replicaStates.includes(state as ReplicaState))
      throw bad(`replicas[${i}].state ${JSON.stringify(state)} (one of ${replicaStates.join(', ')})`);
    const replica: ObservedReplica = { address, state: state as ReplicaState };
    if (typeof detail === 'string') replica.detail = detail;
    return replica;
  });
}

function slotCall(ctx: ComponentCallContext, stage: ExecStage, slotInfo: SlotInfo): StageCall {
  const slotId = slotIdOf(ctx, slotInfo);
  const timeoutMs = execTimeoutMs(ctx);
  return { stage, slot: slotInfo.slot, slotId, version: slotInfo.version, timeoutMs, context: { slotInfo } };
}

/** The id provision gave the slot; a slot without one (not made by this driver) gets the default. */
function slotIdOf(ctx: ComponentCallContext, slot: SlotInfo): string {
  const id = slot.details?.slotId;
  return typeof id === 'string' && id !== '' ? id : `${ctx.component}-${ctx.migrationId}`;
}

function execSpec(ctx: ComponentCallContext): { dir: string; timeout: number } {
  if (ctx.driver.type !== 'exec') {
    throw new PermanentDriverError(
      `component ${ctx.component}: the exec driver got a ${ctx.driver.type} driver`,
    );
  }
  return ctx.driver;
}

function execTimeoutMs(ctx: ComponentCallContext): number {
  return execSpec(ctx).timeout;
}

function provisionOutput(output: Record<string, unknown>): {
  addresses: string[];
  details: Record<string, unknown>;
} {
  const { addresses = [], details = {} } = output;
  if (!Array.isArray(addresses) || !addresses.every((a) => typeof a === 'string')) {
    throw new PermanentDriverError(
      `provision script printed "addresses" that is not a list of "host:port" strings`,
    );
  }
  if (!isPlainObject(details))
    throw new PermanentDriverError('provision script printed "details" that is not an object');
  return { addresses, details };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Finds, checks and runs one stage script; resolves with its JSON output ({} when skipped). */
async function runStage(
  ctx: ComponentCallContext,
  call: StageCall,
  options: DriverCallOptions,
): Promise<Record<string, unknown>> {
  options.signal.throwIfAborted();
  const dir = path.resolve(ctx.baseDir, execSpec(ctx).dir);
  const file = path.join(dir, call.stage);
  const found = await findScript(dir, file);
  if (!found) {
    options.log(`no ${call.stage} script in ${dir}; skipped`);
    return {};
  }
  const stdin = JSON.stringify({
    environment: ctx.environment,
    migrationId: ctx.migrationId,
    component: ctx.component,
    stage: call.stage,
    slot: call.slot,
    slotId: call.slotId,
    version: call.version,
    spec: ctx.spec,
    ...(ctx.dependencies ? { dependencies: ctx.dependencies } : {}),
    ...call.context,
    timeoutMs: call.timeoutMs,
  });
  const env = {
    ...inheritedEnv(),
    ...componentEnv(ctx),
    CUTOVER_ENVIRONMENT: ctx.environment,
    CUTOVER_MIGRATION_ID: ctx.migrationId,
    CUTOVER_COMPONENT: ctx.component,
    CUTOVER_STAGE: call.stage,
    CUTOVER_SLOT: call.slot,
    CUTOVER_SLOT_ID: call.slotId,
    CUTOVER_VERSION: call.version,
    CUTOVER_STATE_DIR: ctx.stateDir.root,
    CUTOVER_TIMEOUT_MS: String(call.timeoutMs),
    ...call.env,
  };
  const prefix = `[${call.stage} ${ctx.component}] `;
  const run = await runScript({ file, cwd: dir, env, stdin, timeoutMs: call.timeoutMs, prefix }, options);
  return judgeRun(call, run, options.signal);
}

/** True when the script exists and may run; false when it is absent; throws when it is unusable. */
async function findScript(dir: string, file: string): Promise<boolean> {
  const dirStat = await stat(dir).catch(() => undefined);
  if (!dirStat?.isDirectory()) {
    throw new PermanentDriverError(
      `exec driver directory ${dir} does not exist (driver "dir" is relative to the topology file)`,
    );
  }
  const fileStat = await stat(file).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw new PermanentDriverError(`cannot read ${file}: ${error.message}`);
  });
  if (!fileStat) return false;
  if (!fileStat.isFile()) throw new PermanentDriverError(`${file} is not a file`);
  try {
    await access(file, fsConstants.X_OK);
  } catch {
    throw new PermanentDriverError(`${file} is not executable: run chmod +x ${file}`);
  }
  return true;
}

function judgeRun(call: StageCall, run: ScriptRun, signal: AbortSignal): Record<string, unknown> {
  const stderr = run.stderrTail.length > 0 ? `; last lines of stderr:\n${run.stderrTail.join('\n')}` : '';
  const tail = stderr || '; no stderr';
  if (run.stopped === 'abort') {
    throw signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
  }
  if (run.stopped === 'timeout') {
    throw new Error(`${call.stage} script timed out after ${formatDuration(call.timeoutMs)}${stderr}`);
  }
  if (run.spawnError)
    throw new PermanentDriverError(`cannot run the ${call.stage} script: ${run.spawnError.message}`);
  if (run.exitCode === exitCodeRetry) {
    throw new Error(
      `${call.stage} script exited with code ${exitCodeRetry} (EX_TEMPFAIL: will retry)${tail}`,
    );
  }
  if (run.exitCode !== 0) {
    const how =
      run.exitCode === null ? `was killed by ${run.exitSignal}` : `exited with code ${run.exitCode}`;
    throw new PermanentDriverError(`${call.stage} script ${how}${tail}`);
  }
  if (run.stdoutOverflow) {
    throw new PermanentDriverError(
      `${call.stage} script printed more than ${maxStdoutBytes} bytes on stdout`,
    );
  }
  const text = run.stdout.trim();
  if (text === '') return {};
  let output: unknown;
  try {
    output = JSON.parse(text);
  } catch {
    output = undefined;
  }
  if (!isPlainObject(output)) {
    throw new PermanentDriverError(
      `${call.stage} script must print a JSON object (or nothing) on stdout; it printed: ${text.slice(0, quotedStdoutChars)}`,
    );
  }
  return output;
}
