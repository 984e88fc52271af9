/**
 * What the container driver names and labels, and how it finds its containers again. The labels
 * are the truth: observe, retire, a re-provision and `topology down` all find containers by them,
 * so one that a crashed runner started but never reported is found too.
 */
import { own } from '../../core/records.js';
import { describeHosts, hostsMatching } from '../../core/topology/placement.js';
import type { ContainerDriverSpec } from '../../core/topology/types.js';
import { type Engine, engineOf, engineOk, lastLine, runEngine } from './container-engine.js';
import { type ComponentCallContext, PermanentDriverError, type SlotInfo } from './types.js';

export const labelPrefix = 'dev.cutover';
export const labels = {
  environment: `${labelPrefix}.environment`,
  component: `${labelPrefix}.component`,
  slot: `${labelPrefix}.slot`,
  version: `${labelPrefix}.version`,
  migration: `${labelPrefix}.migration`,
  replica: `${labelPrefix}.replica`,
} as const;

/**
 * A slot's id is the migration that provisioned it: the two slots of a component (blue from an
 * earlier migration, green from this one) differ, and provisioning the same slot again (a retry,
 * a resumed migration) finds and replaces the earlier attempt's containers by the same name.
 */
export function containerSlotId(ctx: ComponentCallContext, slot?: SlotInfo): string {
  const id = slot?.details?.slotId;
  return typeof id === 'string' && id !== '' ? id : ctx.migrationId;
}

/** `cutover-<environment>-<component>-<slot id>-<replica>`. */
export function containerName(ctx: ComponentCallContext, slotId: string, replica: number): string {
  return `cutover-${ctx.environment}-${ctx.component}-${slotId}-${replica}`;
}

/** A named volume of the slot: `cutover-<environment>-<component>-<slot id>-<name>`. */
export function volumeName(ctx: ComponentCallContext, slotId: string, name: string): string {
  return `cutover-${ctx.environment}-${ctx.component}-${slotId}-${name}`;
}

/** `--filter label=…` flags selecting the containers (or volumes) of an environment, component, slot. */
export function labelFilters(selector: Record<string, string>): string[] {
  return Object.entries(selector).flatMap(([key, value]) => ['--filter', `label=${key}=${value}`]);
}

export function slotSelector(ctx: ComponentCallContext, slotId: string): Record<string, string> {
  return {
    [labels.environment]: ctx.environment,
    [labels.component]: ctx.component,
    [labels.slot]: slotId,
  };
}

/** Names of the containers, running or not, that carry all the labels of `selector`. */
export async function containersLabelled(
  engine: Engine,
  selector: Record<string, string>,
  signal: AbortSignal,
): Promise<string[]> {
  const out = await engineOk(
    engine,
    ['ps', '-a', ...labelFilters(selector), '--format', '{{.Names}}'],
    { signal },
    'listing containers',
  );
  return out
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .sort();
}

/** A container as `inspect` shows it (the fields both podman and docker give). */
export interface InspectedContainer {
  name: string;
  running: boolean;
  status: string;
  exitCode: number;
  image: string;
}

/**
 * `inspect` of the named containers; those that do not exist are left out, not an error. An engine
 * that fails (unreachable, its storage broken) rejects with its own line: a container is reported
 * missing only when a listing of the engine confirms it, because "gone" is drift that a plan
 * replaces and self-heal acts on, while an engine failure is only "unknown".
 */
export async function inspectContainers(
  engine: Engine,
  names: readonly string[],
  signal: AbortSignal,
): Promise<Map<string, InspectedContainer>> {
  const found = new Map<string, InspectedContainer>();
  if (names.length === 0) return found;
  // inspect exits non-zero when one of the names is missing, but still prints the others.
  const result = await runEngine(engine, ['container', 'inspect', ...names], { signal });
  let parsed: unknown;
  try {
    parsed = JSON.parse(result.stdout.trim() === '' ? '[]' : result.stdout);
  } catch {
    throw new Error(`${engine.label}: container inspect printed no JSON: ${result.stderr.trim()}`);
  }
  if (result.code !== 0) await confirmMissing(engine, names, parsed, result.stderr, signal);
  for (const entry of Array.isArray(parsed) ? parsed : []) {
    const e = entry as {
      Name?: string;
      State?: { Running?: boolean; Status?: string; ExitCode?: number };
      Image?: string;
    };
    const name = (e.Name ?? '').replace(/^\//, '');
    found.set(name, {
      name,
      running: e.State?.Running === true,
      status: e.State?.Status ?? 'unknown',
      exitCode: e.State?.ExitCode ?? 0,
      image: e.Image ?? '',
    });
  }
  return found;
}

/**
 * After an `inspect` that exited non-zero: each name it did not show must be absent from the
 * engine's listing (which throws when the engine fails); otherwise the inspect itself failed.
 */
async function confirmMissing(
  engine: Engine,
  names: readonly string[],
  parsed: unknown,
  stderr: string,
  signal: AbortSignal,
): Promise<void> {
  const shown = new Set(
    (Array.isArray(parsed) ? parsed : []).map((e) =>
      String((e as { Name?: string }).Name ?? '').replace(/^\//, ''),
    ),
  );
  const missing = names.filter((name) => !shown.has(name));
  if (missing.length === 0) return;
  const listed = await engineOk(
    engine,
    ['ps', '-a', ...missing.flatMap((name) => ['--filter', `name=^${name}$`]), '--format', '{{.Names}}'],
    { signal },
    'listing containers',
  );
  const present = listed.split('\n').map((line) => line.trim());
  const unexplained = missing.filter((name) => present.includes(name));
  if (unexplained.length > 0) {
    throw new Error(
      `${engine.label}: container inspect of ${unexplained.join(', ')} failed: ${lastLine(stderr)}`,
    );
  }
}

/**
 * The engine of the component's driver, or a permanent error when it is not a container driver.
 * With `hosts`: the host the slot recorded (it stays where it was started), else the one the
 * component's placement labels choose now (placedEngine).
 */
export function engineFor(
  ctx: ComponentCallContext,
  slot?: SlotInfo,
): { engine: Engine; driver: ContainerDriverSpec; hostName?: string } {
  const driver = ctx.driver;
  if (driver.type !== 'container') {
    throw new PermanentDriverError(
      `component ${ctx.component}: the container driver got a ${driver.type} driver`,
    );
  }
  const recorded = slot?.details?.host;
  const placed = placedEngine(
    ctx.spec.driver,
    driver,
    ctx.spec.placement.labels,
    ctx.baseDir,
    typeof recorded === 'string' ? recorded : undefined,
  );
  return { ...placed, driver };
}

/** SIGTERM to SIGKILL for a replica: the component's, else the driver's. */
export function stopTimeoutMsOf(ctx: ComponentCallContext, driver: ContainerDriverSpec): number {
  return ctx.spec.stopTimeout ?? driver.stopTimeout;
}

/** One replica of a slot, as provision records it in the slot's details. */
export interface ContainerReplica {
  index: number;
  name: string;
  /** Host port of each of the component's `ports`, in order. */
  hostPorts: number[];
}

/** The replicas the slot's details recorded; a malformed entry is passed over. */
export function recordedContainers(slot: SlotInfo): ContainerReplica[] {
  const replicas = own(slot.details ?? {}, 'replicas');
  if (!Array.isArray(replicas)) return [];
  return replicas.filter(
    (r): r is ContainerReplica =>
      typeof r === 'object' &&
      r !== null &&
      typeof r.name === 'string' &&
      Number.isSafeInteger(r.index) &&
      Array.isArray(r.hostPorts),
  );
}

/**
 * The engine a component runs on: the driver's own, or with `hosts` the named host (`hostName`,
 * recorded by an earlier provision) else the first whose labels match `labels` (core placement.ts).
 * A host's runtime and config default to the driver's.
 */
export function placedEngine(
  driverName: string,
  driver: ContainerDriverSpec,
  labels: Record<string, string>,
  baseDir: string,
  hostName?: string,
): { engine: Engine; hostName?: string } {
  const { hosts, ...rest } = driver;
  if (hosts === undefined) return { engine: engineOf(driverName, driver, baseDir) };
  const chosen = hostName !== undefined && own(hosts, hostName) ? hostName : hostsMatching(hosts, labels)[0];
  const host = chosen === undefined ? undefined : own(hosts, chosen);
  if (chosen === undefined || host === undefined) {
    throw new PermanentDriverError(
      `driver ${driverName}: no host matches placement labels ${JSON.stringify(labels)} (hosts: ${describeHosts(hosts)}); change the component's placement.labels or a host's labels`,
    );
  }
  const spec: ContainerDriverSpec = { ...rest };
  delete spec.host;
  if (host.host !== undefined) spec.host = host.host;
  if (host.runtime !== undefined) spec.runtime = host.runtime;
  if (host.config !== undefined) spec.config = host.config;
  const engine = engineOf(driverName, spec, baseDir);
  return {
    engine: { ...engine, label: `driver ${driverName} host ${chosen} (${engine.name})` },
    hostName: chosen,
  };
}
