/**
 * Starting a slot's containers: the image checked (and pulled as `pull` says), the slot's named
 * volumes created with labels, then one detached `run` per replica, checked still running after a
 * start-up grace. On any failure what this call started is removed before it throws.
 */

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { formatDuration } from '../../core/topology/duration.js';
import type { ContainerDriverSpec } from '../../core/topology/types.js';
import { componentEnv } from './component-env.js';
import { type Engine, engineOk, enginePullTimeoutMs, lastLine, runEngine } from './container-engine.js';
import {
  type ContainerReplica,
  containerName,
  inspectContainers,
  labels,
  stopTimeoutMsOf,
  volumeName,
} from './container-names.js';
import type { PortPool } from './port-pool.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type Slot,
} from './types.js';

/** A replica must still run this long after `run` returned to count as started. */
export const defaultContainerGraceMs = 500;
/** Lines of a failed replica's log quoted in the error. */
const logTailLines = 10;

export interface StartTarget {
  engine: Engine;
  driver: ContainerDriverSpec;
  slot: Slot;
  slotId: string;
  graceMs: number;
  /** Where host ports not written in the file come from. */
  ports: PortPool;
}

/** The image as it resolved at provision: what the plan compares with the image the tag names now. */
export interface StartedSlot {
  replicas: ContainerReplica[];
  imageId: string;
  network: string | undefined;
}

export async function startContainers(
  ctx: ComponentCallContext,
  target: StartTarget,
  options: DriverCallOptions,
): Promise<StartedSlot> {
  const { engine, slotId } = target;
  const image = ctx.spec.image;
  if (!image)
    throw new PermanentDriverError(`component ${ctx.component} has no image for the container driver`);
  const imageId = await ensureImage(ctx, engine, image, options);
  const network = ctx.spec.network ?? target.driver.network;
  const ports = ctx.spec.ports ?? [];
  const chosenPerReplica = ports.filter((p) => p.host === undefined).length;
  const free = await target.ports.take(chosenPerReplica * ctx.spec.replicas, ctx.reservedPorts);
  const env = componentEnv(ctx);
  refuseLineBreaks(ctx, env);
  const volumeArgs = await slotVolumes(ctx, engine, slotId, options);
  const started: string[] = [];
  const replicas: ContainerReplica[] = [];
  try {
    for (let index = 0; index < ctx.spec.replicas; index++) {
      const name = containerName(ctx, slotId, index);
      let hostPorts = ports.map((p) => p.host ?? (free.shift() as number));
      // A run that fails after creating its container leaves it `Created`: the catch removes it.
      started.push(name);
      for (let attempt = 1; ; attempt++) {
        try {
          await runReplica(
            ctx,
            target,
            { name, index, hostPorts, network, env, volumeArgs, imageId },
            options,
          );
          break;
        } catch (error) {
          // A port chosen free was taken by another program before the engine bound it: the
          // choice and the bind are apart (podman takes ~1 s to start). Other ports, not a failed
          // migration; a port written in the file is the user's to free.
          if (chosenPerReplica === 0 || attempt >= portAttempts || !portTaken(error)) throw error;
          options.log(
            `${name}: ${lastLine((error as Error).message)}; starting it again on other host ports`,
          );
          await removeContainers(engine, [name]);
          const more = await target.ports.take(chosenPerReplica, ctx.reservedPorts);
          hostPorts = ports.map((p) => p.host ?? (more.shift() as number));
        }
      }
      replicas.push({ index, name, hostPorts });
    }
    await checkStillRunning(ctx, engine, started, target.graceMs, options);
  } catch (error) {
    if (started.length > 0) await removeContainers(engine, started);
    throw error;
  }
  return { replicas, imageId, network };
}

/** Runs of a replica whose chosen host port another program took first: the first and two more. */
const portAttempts = 3;

function portTaken(error: unknown): boolean {
  return error instanceof Error && /address already in use/i.test(error.message);
}

/** `rm -f` of containers, whatever their state; a failure to remove is not the caller's error. */
async function removeContainers(engine: Engine, names: string[]): Promise<void> {
  await runEngine(engine, ['rm', '-f', ...names], { signal: new AbortController().signal }).catch(
    () => undefined,
  );
}

/**
 * `run -d` of one replica, its environment (the component's and cutover's) in a 0600 file the
 * engine's CLI reads (`--env-file`, read client-side by podman, podman-remote and docker alike) and
 * that is removed as soon as `run` returns: no value is on the engine's command line (which `ps`
 * and podman's CreateCommand show), and none is in the CLI's own environment, where variables like
 * CONTAINER_CONNECTION, DOCKER_CONTEXT or LD_PRELOAD would change how the CLI itself runs.
 */
async function runReplica(
  ctx: ComponentCallContext,
  target: StartTarget,
  r: ReplicaRun,
  options: DriverCallOptions,
): Promise<void> {
  const { engine } = target;
  const dir = await mkdtemp(path.join(tmpdir(), 'cutover-env-'));
  try {
    const envFile = path.join(dir, 'env');
    const lines = Object.entries(replicaEnv(ctx, target, r)).map(([key, value]) => `${key}=${value}\n`);
    await writeFile(envFile, lines.join(''), { mode: 0o600 });
    options.log(`starting container ${r.name} (${ctx.spec.image})`);
    const result = await runEngine(engine, runArgs(ctx, target, r, envFile), {
      signal: options.signal,
      timeoutMs: enginePullTimeoutMs,
    });
    if (result.code !== 0) {
      throw new PermanentDriverError(
        `component ${ctx.component}: ${engine.name} run of ${r.name} (${ctx.spec.image}) failed: ${lastLine(result.stderr)}`,
      );
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The env file holds one `KEY=value` a line, the value taken literally up to the line's end (both
 * engines split at the first `=`), so a value may hold `=`, `#` and spaces but no line break.
 */
function refuseLineBreaks(ctx: ComponentCallContext, env: Record<string, string>): void {
  for (const [key, value] of Object.entries(env)) {
    if (/[\r\n]/.test(value)) {
      throw new PermanentDriverError(
        `component ${ctx.component}: env.${key} has a line break, which the container engine's env file cannot carry; put the value in a file and mount it (volumes), or encode it (e.g. base64)`,
      );
    }
  }
}

/**
 * The image's id. The plan's (ctx.plannedImageId) when it resolved one: that exact image runs, or
 * none, so a tag moved since the plan never puts an unreviewed build live. Otherwise pulled first
 * when `pull` says: `always` pulls, `missing` pulls only when the engine does not have it, `never`
 * refuses a missing image with what to do.
 */
async function ensureImage(
  ctx: ComponentCallContext,
  engine: Engine,
  image: string,
  options: DriverCallOptions,
): Promise<string> {
  if (ctx.plannedImageId !== undefined) return plannedImage(ctx, engine, image, ctx.plannedImageId, options);
  const pull = ctx.spec.pull ?? 'missing';
  const inspect = () =>
    runEngine(engine, ['image', 'inspect', '--format', '{{.Id}}', image], { signal: options.signal });
  let found = pull === 'always' ? undefined : await inspect();
  if (found === undefined || found.code !== 0) {
    if (pull === 'never') {
      throw new PermanentDriverError(
        `component ${ctx.component}: image ${image} is not in ${engine.label}'s store and pull is never; build or pull it (${engine.name} pull ${image}), or set pull: missing`,
      );
    }
    options.log(`pulling ${image}`);
    const pulled = await runEngine(engine, ['pull', image], {
      signal: options.signal,
      timeoutMs: enginePullTimeoutMs,
    });
    if (pulled.code !== 0) {
      throw new PermanentDriverError(
        `component ${ctx.component}: cannot pull image ${image}: ${lastLine(pulled.stderr)}; check the name and the registry's credentials, or build it locally`,
      );
    }
    found = await inspect();
  }
  if (found.code !== 0)
    throw new Error(`${engine.label}: image inspect ${image} failed: ${lastLine(found.stderr)}`);
  return normaliseId(found.stdout.trim());
}

/** The planned image id, checked present in the engine's store; a permanent error when it is not. */
async function plannedImage(
  ctx: ComponentCallContext,
  engine: Engine,
  image: string,
  planned: string,
  options: DriverCallOptions,
): Promise<string> {
  const found = await runEngine(engine, ['image', 'inspect', '--format', '{{.Id}}', planned], {
    signal: options.signal,
  });
  if (found.code === 0 && normaliseId(found.stdout.trim()) === planned) return planned;
  // Absent, or the engine failed: a listing that throws on an engine failure tells them apart.
  await engineOk(engine, ['image', 'ls', '-q'], { signal: options.signal }, 'listing images');
  throw new PermanentDriverError(
    `component ${ctx.component}: image ${image} was ${planned.slice(0, 'sha256:'.length + 12)} when planned, which ${engine.label} no longer has (the tag moved since the plan); plan again and review the new image`,
  );
}

/** Image ids as `sha256:<hex>` whichever engine gave them (podman prints the bare hex). */
export function normaliseId(id: string): string {
  return id.startsWith('sha256:') ? id : `sha256:${id}`;
}

/** `-v` flags; a named volume of the slot is created first, with the slot's labels. */
async function slotVolumes(
  ctx: ComponentCallContext,
  engine: Engine,
  slotId: string,
  options: DriverCallOptions,
): Promise<string[]> {
  const args: string[] = [];
  for (const spec of ctx.spec.volumes ?? []) {
    const [source = '', target = '', mode] = spec.split(':');
    const suffix = mode === undefined ? '' : `:${mode}`;
    if (source.startsWith('/') || source.startsWith('.')) {
      args.push('-v', `${path.resolve(ctx.baseDir, source)}:${target}${suffix}`);
      continue;
    }
    const name = volumeName(ctx, slotId, source);
    const exists = await runEngine(engine, ['volume', 'inspect', name], { signal: options.signal });
    if (exists.code !== 0) {
      await engineOk(
        engine,
        ['volume', 'create', ...labelArgs(ctx, slotId), name],
        { signal: options.signal },
        `creating volume ${name}`,
      );
    }
    args.push('-v', `${name}:${target}${suffix}`);
  }
  return args;
}

function labelArgs(ctx: ComponentCallContext, slotId: string): string[] {
  return [
    '--label',
    `${labels.environment}=${ctx.environment}`,
    '--label',
    `${labels.component}=${ctx.component}`,
    '--label',
    `${labels.slot}=${slotId}`,
    '--label',
    `${labels.version}=${ctx.spec.version}`,
    '--label',
    `${labels.migration}=${ctx.migrationId}`,
  ];
}

interface ReplicaRun {
  name: string;
  index: number;
  hostPorts: number[];
  network: string | undefined;
  env: Record<string, string>;
  volumeArgs: string[];
  imageId: string;
}

/**
 * `run -d` of one replica. On a bridge network each port is published on 127.0.0.1 only (health
 * probes and the router reach it there) and `PORT` is the first container port. On the host
 * network nothing can be remapped: the container gets the host port cutover chose in `PORT` (and
 * `PORT_<container port>` for each port) and must listen there, as a process component does.
 * The image runs by its id, so every replica of the slot runs the image that was checked.
 */
function runArgs(ctx: ComponentCallContext, target: StartTarget, r: ReplicaRun, envFile: string): string[] {
  const spec = ctx.spec;
  const ports = spec.ports ?? [];
  const host = r.network === 'host';
  const args = ['run', '-d', '--name', r.name, ...target.engine.runArgs, ...labelArgs(ctx, target.slotId)];
  args.push('--label', `${labels.replica}=${r.index}`);
  if (r.network !== undefined) args.push('--network', r.network);
  args.push('--env-file', envFile);
  ports.forEach((port, i) => {
    if (!host) args.push('-p', `127.0.0.1:${r.hostPorts[i] as number}:${port.container}`);
  });
  if (spec.resources?.cpus !== undefined) args.push('--cpus', String(spec.resources.cpus));
  if (spec.resources?.memory !== undefined) args.push('--memory', spec.resources.memory);
  if (spec.user !== undefined) args.push('--user', spec.user);
  args.push(...r.volumeArgs);
  const stopSeconds = Math.ceil(stopTimeoutMsOf(ctx, target.driver) / 1000);
  args.push('--stop-timeout', String(stopSeconds));
  args.push(r.imageId, ...(spec.command ?? []));
  return args;
}

/**
 * cutover's variables, then the component's `env` (which may override them, as before): on the
 * host network the container gets the host port cutover chose in `PORT` and `PORT_<container port>`.
 */
function replicaEnv(ctx: ComponentCallContext, target: StartTarget, r: ReplicaRun): Record<string, string> {
  const spec = ctx.spec;
  const ports = spec.ports ?? [];
  const host = r.network === 'host';
  const cutoverEnv: Record<string, string> = {
    CUTOVER_ENVIRONMENT: ctx.environment,
    CUTOVER_COMPONENT: ctx.component,
    CUTOVER_SLOT: target.slot,
    CUTOVER_SLOT_ID: target.slotId,
    CUTOVER_VERSION: spec.version,
    CUTOVER_REPLICA: String(r.index),
  };
  ports.forEach((port, i) => {
    if (host) cutoverEnv[`PORT_${port.container}`] = String(r.hostPorts[i] as number);
  });
  const first = ports[0];
  if (first) cutoverEnv.PORT = String(host ? (r.hostPorts[0] as number) : first.container);
  return { ...cutoverEnv, ...r.env };
}

/** A replica that stopped within the grace fails the call, quoting its log and exit code. */
async function checkStillRunning(
  ctx: ComponentCallContext,
  engine: Engine,
  names: readonly string[],
  graceMs: number,
  options: DriverCallOptions,
): Promise<void> {
  await sleep(graceMs, undefined, { signal: options.signal });
  const seen = await inspectContainers(engine, names, options.signal);
  for (const name of names) {
    const container = seen.get(name);
    if (container?.running) continue;
    const how = container
      ? `exited with code ${container.exitCode} (${container.status})`
      : 'disappeared (removed by someone else?)';
    const logs = await runEngine(engine, ['logs', '--tail', String(logTailLines), name], {
      signal: options.signal,
    });
    const text = `${logs.stdout}${logs.stderr}`.trim();
    const tail = text === '' ? '; it wrote no output' : `; last lines of its output:\n${text}`;
    throw new PermanentDriverError(
      `component ${ctx.component}: container ${name} ${how} within ${formatDuration(graceMs)} of starting; check the image ${ctx.spec.image} and its command${tail}`,
    );
  }
}
