/**
 * The container driver: components realised as containers of a Podman or Docker engine, one per
 * replica, driven through the engine's CLI (container-engine.ts).
 *
 * Contract (for its docs page, docs/drivers/container.md):
 *
 * - A slot's id is the migration that provisioned it (`details.slotId`). Its replicas are named
 *   `cutover-<environment>-<component>-<slot id>-<n>` and labelled `dev.cutover.environment`,
 *   `.component`, `.slot`, `.version`, `.migration`, `.replica`; every later call finds them by
 *   those labels, so a container a killed runner started but never reported is found too.
 * - provision removes the containers an earlier attempt left in the slot, checks the image (pull:
 *   never refuses a missing one; missing pulls it; always pulls), creates the slot's named volumes,
 *   runs the replicas detached (ports published on 127.0.0.1, a free host port per replica unless
 *   fixed) and fails, quoting the log, when one is not running after the start-up grace. Addresses
 *   are `127.0.0.1:<host port of the first port>`: health probes and the router go through them.
 * - retire stops (SIGTERM, SIGKILL after stopTimeout) and removes the slot's containers. Volumes
 *   stay; `topology down --volumes` removes the component's (found by label). Idempotent.
 * - observe reads the slot's containers by label: running (and its port accepting), not_answering,
 *   or not_running (exited, or removed by hand).
 * - With `hosts`, a slot runs on the host its component's placement labels choose at provision
 *   (`details.host`); every later call on the slot goes to that host (container-names.ts).
 * - logs: `logs --tail N` of each replica, quoted in the migration log when the gate fails.
 * - drain does nothing: the router drains traffic. replicate copies blue's named volumes into
 *   green's, or runs replicate.command, in a helper container of green's image (container-replicate.ts).
 */
import type { ObservedReplica } from '../../core/observed.js';
import { type Engine, engineOk, runEngine } from './container-engine.js';
import {
  type ContainerReplica,
  containerSlotId,
  containersLabelled,
  engineFor,
  inspectContainers,
  labelFilters,
  labels,
  placedEngine,
  recordedContainers,
  slotSelector,
  stopTimeoutMsOf,
} from './container-names.js';
import { replicateContainerSlot } from './container-replicate.js';
import { defaultContainerGraceMs, startContainers } from './container-start.js';
import { PortPool } from './port-pool.js';
import { replicaAnswers } from './process-observe.js';
import type {
  ComponentCallContext,
  ComponentDriver,
  DriverCallOptions,
  ReplicaLog,
  SlotInfo,
} from './types.js';

export interface ContainerDriverOptions {
  /** A replica not running this long after `run` returned fails the call (default 500 ms). */
  startupGraceMs?: number;
  /** Where host ports come from; share one with every driver that may provision at the same time. */
  ports?: PortPool;
}

export function createContainerDriver(driverOptions: ContainerDriverOptions = {}): ComponentDriver {
  const graceMs = driverOptions.startupGraceMs ?? defaultContainerGraceMs;
  const ports = driverOptions.ports ?? new PortPool();
  return {
    async provision(ctx, slot, options) {
      options.signal.throwIfAborted();
      const { engine, driver, hostName } = engineFor(ctx);
      const slotId = containerSlotId(ctx);
      await removeSlotContainers(ctx, slotId, options, 'an earlier attempt left');
      const started = await startContainers(ctx, { engine, driver, slot, slotId, graceMs, ports }, options);
      const serving = (ctx.spec.ports ?? []).length > 0;
      return {
        component: ctx.component,
        slot,
        version: ctx.spec.version,
        addresses: serving ? started.replicas.map((r) => `127.0.0.1:${r.hostPorts[0]}`) : [],
        imageId: started.imageId,
        details: {
          slotId,
          engine: engine.name,
          ...(hostName === undefined ? {} : { host: hostName }),
          image: ctx.spec.image,
          imageId: started.imageId,
          ...(started.network === undefined ? {} : { network: started.network }),
          replicas: started.replicas,
        },
      };
    },

    async replicate(ctx, from, to, options) {
      await replicateContainerSlot(ctx, from, to, options);
    },

    async drain() {
      // The router drains traffic; the containers keep serving until retire stops them.
    },

    async retire(ctx, slot, options) {
      options.signal.throwIfAborted();
      await removeSlotContainers(ctx, containerSlotId(ctx, slot), options, 'retiring', slot);
    },

    async observe(ctx, slot, options) {
      return observeContainerSlot(ctx, slot, options);
    },

    async logs(ctx, slot, lines, options) {
      return containerLogs(ctx, slot, lines, options);
    },

    async removeVolumes(ctx, options) {
      // Every host of the driver: a component moved by its placement left volumes where it ran.
      const removed: string[] = [];
      for (const engine of enginesOf(ctx)) removed.push(...(await removeVolumesOn(engine, ctx, options)));
      return removed.sort();
    },
  };
}

/** The engine of each host of the component's driver (its one engine without `hosts`). */
function enginesOf(ctx: ComponentCallContext): Engine[] {
  const driver = ctx.driver;
  if (driver.type !== 'container' || driver.hosts === undefined) return [engineFor(ctx).engine];
  return Object.keys(driver.hosts).map(
    (name) => placedEngine(ctx.spec.driver, driver, {}, ctx.baseDir, name).engine,
  );
}

async function removeVolumesOn(
  engine: Engine,
  ctx: ComponentCallContext,
  options: DriverCallOptions,
): Promise<string[]> {
  const selector = { [labels.environment]: ctx.environment, [labels.component]: ctx.component };
  const out = await engineOk(
    engine,
    ['volume', 'ls', ...labelFilters(selector), '--format', '{{.Name}}'],
    { signal: options.signal },
    'listing volumes',
  );
  const names = out
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .sort();
  if (names.length > 0) {
    await engineOk(
      engine,
      ['volume', 'rm', '-f', ...names],
      { signal: options.signal },
      `removing volumes ${names.join(', ')}`,
    );
  }
  return names;
}

/**
 * Stops (SIGTERM, SIGKILL after the stop timeout) and removes every container of the slot, found
 * by its labels. Idempotent: a slot with none left is done.
 */
export async function removeSlotContainers(
  ctx: ComponentCallContext,
  slotId: string,
  options: DriverCallOptions,
  why: string,
  slot?: SlotInfo,
): Promise<string[]> {
  const { engine, driver } = engineFor(ctx, slot);
  const names = await containersLabelled(engine, slotSelector(ctx, slotId), options.signal);
  if (names.length === 0) return [];
  options.log(`${why}: stopping and removing ${names.join(', ')}`);
  const seconds = Math.ceil(stopTimeoutMsOf(ctx, driver) / 1000);
  const call = { signal: options.signal, timeoutMs: (seconds + 60) * 1000 };
  // stop may fail for one already gone; rm -f then removes whatever is left.
  await runEngine(engine, ['stop', '-t', String(seconds), ...names], call);
  const removed = await runEngine(engine, ['rm', '-f', ...names], call);
  if (removed.code !== 0) {
    const left = await containersLabelled(engine, slotSelector(ctx, slotId), options.signal);
    if (left.length > 0) {
      throw new Error(`${engine.label}: cannot remove ${left.join(', ')}: ${removed.stderr.trim()}`);
    }
  }
  return names;
}

/**
 * Each recorded replica: `running` when its container runs and its first port accepts a TCP
 * connection on 127.0.0.1, `not_answering` when it runs but refuses, `not_running` when it exited
 * or is gone. Replicas come from the slot's details, else from the containers labelled with it.
 */
export async function observeContainerSlot(
  ctx: ComponentCallContext,
  slot: SlotInfo,
  options: DriverCallOptions,
): Promise<ObservedReplica[]> {
  const { engine } = engineFor(ctx, slot);
  const slotId = containerSlotId(ctx, slot);
  let replicas: ContainerReplica[] = recordedContainers(slot);
  if (replicas.length === 0) {
    const names = await containersLabelled(engine, slotSelector(ctx, slotId), options.signal);
    replicas = names.map((name, index) => ({ index, name, hostPorts: [] }));
  }
  const seen = await inspectContainers(
    engine,
    replicas.map((r) => r.name),
    options.signal,
  );
  return Promise.all(
    replicas.map(async (replica): Promise<ObservedReplica> => {
      const port = replica.hostPorts[0];
      const address = port === undefined ? null : `127.0.0.1:${port}`;
      const container = seen.get(replica.name);
      if (!container) return { address, state: 'not_running', detail: `container ${replica.name} is gone` };
      if (!container.running) {
        return {
          address,
          state: 'not_running',
          detail: `container ${replica.name} ${container.status} (exit code ${container.exitCode})`,
        };
      }
      if (address === null) return { address, state: 'running' };
      const probe = await replicaAnswers(address, options.signal);
      if (!probe) return { address, state: 'unknown', detail: 'observation stopped' };
      if (probe.ok) return { address, state: 'running' };
      return { address, state: 'not_answering', detail: probe.summary };
    }),
  );
}

/**
 * `logs --tail N` of each recorded replica (stdout and stderr together, as the engine keeps them).
 * A container already gone has no lines: it is left out.
 */
export async function containerLogs(
  ctx: ComponentCallContext,
  slot: SlotInfo,
  lines: number,
  options: DriverCallOptions,
): Promise<ReplicaLog[]> {
  const { engine } = engineFor(ctx, slot);
  const out: ReplicaLog[] = [];
  for (const replica of recordedContainers(slot)) {
    const result = await runEngine(engine, ['logs', '--tail', String(lines), replica.name], {
      signal: options.signal,
    });
    if (result.code !== 0) continue;
    // The engine writes the container's stdout to its stdout and its stderr to its stderr: the
    // order between the two is lost, stdout first is the honest best.
    const text = `${result.stdout}${result.stderr}`.split('\n').filter((l) => l.trim() !== '');
    out.push({ replica: replica.index, name: replica.name, lines: text.slice(-lines) });
  }
  return out;
}
