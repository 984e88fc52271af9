/**
 * Starting a slot's containers: the image checked (and pulled as `pull` says), the slot's named
 * volumes created with labels, then one detached `run` per replica, checked still running after a
 * start-up grace. On any failure what this call started is removed before it throws.
 */

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
import { freePorts } from './process-start.js';
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

/**
 * Environment variables the engine's CLI itself reads. The component's other variables reach the
 * container as `--env KEY`, the value in the engine's environment, never on its command line (where
 * `ps` shows it); these would change how the CLI itself runs, so they go on the command line.
 */
const engineOwnVariables = new Set([
  'PATH',
  'HOME',
  'TMPDIR',
  'XDG_RUNTIME_DIR',
  'XDG_CONFIG_HOME',
  'XDG_DATA_HOME',
  'CONTAINERS_CONF',
  'CONTAINERS_STORAGE_CONF',
  'CONTAINERS_REGISTRIES_CONF',
  'CONTAINER_HOST',
  'DOCKER_HOST',
  'DOCKER_CONFIG',
  'SSH_AUTH_SOCK',
  'LD_PRELOAD',
  'LD_LIBRARY_PATH',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
]);

export interface StartTarget {
  engine: Engine;
  driver: ContainerDriverSpec;
  slot: Slot;
  slotId: string;
  graceMs: number;
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
  const free = await freePorts(ports.filter((p) => p.host === undefined).length * ctx.spec.replicas);
  const volumeArgs = await slotVolumes(ctx, engine, slotId, options);
  const env = componentEnv(ctx);
  const started: string[] = [];
  const replicas: ContainerReplica[] = [];
  try {
    for (let index = 0; index < ctx.spec.replicas; index++) {
      const name = containerName(ctx, slotId, index);
      const hostPorts = ports.map((p) => p.host ?? (free.shift() as number));
      const args = runArgs(ctx, target, { name, index, hostPorts, network, env, volumeArgs, imageId });
      options.log(`starting container ${name} (${image})`);
      const passed = Object.fromEntries(Object.entries(env).filter(([key]) => !engineOwnVariables.has(key)));
      const result = await runEngine(engine, args, {
        signal: options.signal,
        env: passed,
        timeoutMs: enginePullTimeoutMs,
      });
      if (result.code !== 0) {
        throw new PermanentDriverError(
          `component ${ctx.component}: ${engine.name} run of ${name} (${image}) failed: ${lastLine(result.stderr)}`,
        );
      }
      started.push(name);
      replicas.push({ index, name, hostPorts });
    }
    await checkStillRunning(ctx, engine, started, target.graceMs, options);
  } catch (error) {
    if (started.length > 0) {
      await runEngine(engine, ['rm', '-f', ...started], { signal: new AbortController().signal }).catch(
        () => undefined,
      );
    }
    throw error;
  }
  return { replicas, imageId, network };
}

/**
 * The image's id, pulled first when `pull` says: `always` pulls, `missing` pulls only when the
 * engine does not have it, `never` refuses a missing image with what to do.
 */
async function ensureImage(
  ctx: ComponentCallContext,
  engine: Engine,
  image: string,
  options: DriverCallOptions,
): Promise<string> {
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
function runArgs(ctx: ComponentCallContext, target: StartTarget, r: ReplicaRun): string[] {
  const spec = ctx.spec;
  const ports = spec.ports ?? [];
  const host = r.network === 'host';
  const args = ['run', '-d', '--name', r.name, ...target.engine.runArgs, ...labelArgs(ctx, target.slotId)];
  args.push('--label', `${labels.replica}=${r.index}`);
  if (r.network !== undefined) args.push('--network', r.network);
  const cutoverEnv: Record<string, string> = {
    CUTOVER_ENVIRONMENT: ctx.environment,
    CUTOVER_COMPONENT: ctx.component,
    CUTOVER_SLOT: target.slot,
    CUTOVER_SLOT_ID: target.slotId,
    CUTOVER_VERSION: spec.version,
    CUTOVER_REPLICA: String(r.index),
  };
  ports.forEach((port, i) => {
    const hostPort = r.hostPorts[i] as number;
    if (host) cutoverEnv[`PORT_${port.container}`] = String(hostPort);
    else args.push('-p', `127.0.0.1:${hostPort}:${port.container}`);
  });
  const first = ports[0];
  if (first) cutoverEnv.PORT = String(host ? (r.hostPorts[0] as number) : first.container);
  for (const [key, value] of Object.entries(cutoverEnv)) args.push('--env', `${key}=${value}`);
  for (const [key, value] of Object.entries(r.env)) {
    args.push('--env', engineOwnVariables.has(key) ? `${key}=${value}` : key);
  }
  if (spec.resources?.cpus !== undefined) args.push('--cpus', String(spec.resources.cpus));
  if (spec.resources?.memory !== undefined) args.push('--memory', spec.resources.memory);
  if (spec.user !== undefined) args.push('--user', spec.user);
  args.push(...r.volumeArgs);
  const stopSeconds = Math.ceil(stopTimeoutMsOf(ctx, target.driver) / 1000);
  args.push('--stop-timeout', String(stopSeconds));
  args.push(r.imageId, ...(spec.command ?? []));
  return args;
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
