import { InvariantError } from '../errors.js';
import type { NotifyEventName } from '../notify/types.js';
import { setOwn } from '../records.js';
import type { ComponentReuse } from './component-reuse.js';
import { defaultRefFormat } from './dependency-refs.js';
import { parseDuration } from './duration.js';
import type {
  ComponentFile,
  DriverFile,
  HealthFile,
  NotifyTargetFile,
  RouteFile,
  RouteTlsFile,
  TopologyFile,
} from './file-types.js';
import { normalizeHooks } from './normalize-hooks.js';
import { normalizeShift } from './shift-holds.js';
import type {
  Component,
  ComponentEnvValue,
  ContainerDriverSpec,
  ContainerHost,
  DriverSpec,
  Health,
  NotifyTarget,
  NotifyUrl,
  PostgresDriverSpec,
  RedisDriverSpec,
  Route,
  RouteTls,
  Topology,
} from './types.js';
import { defaults } from './types.js';

/**
 * A checked topology file → the model. Applies defaults, parses durations once, sorts what has no
 * meaningful order, and inserts every record's keys in sorted order, so that equal layouts give equal
 * models and byte-identical JSON whatever the order of the file.
 *
 * Invariant (a property test holds it): every object of the model has its keys in sorted order, so
 * `JSON.stringify(model)` is already canonical JSON. Fixed-shape objects are written below with
 * their fields in alphabetical order for that reason; keep them so.
 *
 * Invariant: a component's model is a function of its own entry alone (component-reuse.ts takes a
 * component loaded before from the same entry, `reuse`, rather than normalising it again).
 */
export function normalizeTopology(file: TopologyFile, reuse?: Pick<ComponentReuse, 'component'>): Topology {
  const metadata = {} as Topology['metadata'];
  if (file.metadata.description !== undefined) metadata.description = file.metadata.description;
  metadata.labels = sortedRecord(file.metadata.labels ?? {});
  metadata.name = file.metadata.name;
  return {
    apiVersion: 'cutover/v1',
    components: mapSorted(
      file.components,
      reuse ? (c, name) => reuse.component(name, c) ?? normalizeComponent(c) : normalizeComponent,
    ),
    drivers: mapSorted(file.drivers ?? {}, normalizeDriver),
    kind: 'Topology',
    metadata,
    ...(file.notify === undefined ? {} : { notify: mapSorted(file.notify, normalizeNotifyTarget) }),
    routes: mapSorted(file.routes ?? {}, normalizeRoute),
    strategy: normalizeStrategy(file.strategy),
  };
}

function normalizeStrategy(s: TopologyFile['strategy']): Topology['strategy'] {
  const hooks = normalizeHooks(s?.hooks);
  return {
    bake: duration(s?.bake, defaults.bakeMs),
    commit: s?.commit ?? defaults.commit,
    ...(hooks === undefined ? {} : { hooks }),
    ...(s?.parallelism === undefined ? {} : { parallelism: s.parallelism }),
    ...(s?.hostWait === undefined ? {} : { hostWait: duration(s.hostWait, 0) }),
  };
}

function normalizeHosts(
  hosts: NonNullable<Extract<DriverFile, { type: 'container' }>['hosts']>,
): Record<string, ContainerHost> {
  const out: Record<string, ContainerHost> = {};
  for (const name of Object.keys(hosts).sort()) {
    const h = hosts[name] as NonNullable<typeof hosts>[string];
    const host = {} as ContainerHost;
    if (h.config !== undefined) host.config = h.config;
    if (h.host !== undefined) host.host = h.host;
    host.labels = sortedRecord(h.labels ?? {});
    if (h.runtime !== undefined) host.runtime = h.runtime;
    out[name] = host;
  }
  return out;
}

function normalizeDriver(driver: DriverFile): DriverSpec {
  const spec = normalizeDriverFields(driver);
  if (driver.runsOn === undefined) return spec;
  // Inserted in its sorted place among the fixed fields (the invariant above).
  return Object.fromEntries(
    Object.entries({ ...spec, runsOn: driver.runsOn }).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  ) as DriverSpec;
}

function normalizeDriverFields(driver: DriverFile): DriverSpec {
  switch (driver.type) {
    case 'process':
      return {
        ...(driver.address !== undefined ? { address: driver.address } : {}),
        stopTimeout: duration(driver.stopTimeout, defaults.processStopTimeoutMs),
        type: 'process',
      };
    case 'exec':
      return { dir: driver.dir, timeout: duration(driver.timeout, defaults.execTimeoutMs), type: 'exec' };
    case 'container': {
      const out = {} as ContainerDriverSpec;
      if (driver.config !== undefined) out.config = driver.config;
      if (driver.engine !== undefined) out.engine = driver.engine;
      if (driver.host !== undefined) out.host = driver.host;
      if (driver.hosts !== undefined) out.hosts = normalizeHosts(driver.hosts);
      if (driver.network !== undefined) out.network = driver.network;
      if (driver.runtime !== undefined) out.runtime = driver.runtime;
      out.stopTimeout = duration(driver.stopTimeout, defaults.containerStopTimeoutMs);
      out.type = 'container';
      return out;
    }
    case 'postgres': {
      const out = {} as PostgresDriverSpec;
      if (driver.bin !== undefined) out.bin = driver.bin;
      out.database = driver.database ?? defaults.postgresDatabase;
      if (driver.init !== undefined) out.init = driver.init;
      if (driver.runAs !== undefined) out.runAs = driver.runAs;
      out.type = 'postgres';
      out.user = driver.user ?? defaults.postgresUser;
      return out;
    }
    case 'redis': {
      const out = {} as RedisDriverSpec;
      out.appendfsync = driver.appendfsync ?? defaults.redisAppendfsync;
      if (driver.bin !== undefined) out.bin = driver.bin;
      out.type = 'redis';
      return out;
    }
    case 'router':
      return { type: 'router' };
    case 'nginx':
      return {
        configFile: driver.configFile,
        reload: driver.reload ?? [...defaults.nginxReload],
        type: 'nginx',
      };
    case 'haproxy':
      return driver.bin === undefined ? { type: 'haproxy' } : { type: 'haproxy', bin: driver.bin };
    case 'caddy':
      return driver.bin !== undefined ? { bin: driver.bin, type: 'caddy' } : { type: 'caddy' };
  }
}

// Below, fields are inserted in alphabetical order (see the invariant above), optional ones only
// when set: no `delete`, which would also turn the objects into slow dictionaries.

function normalizeComponent(c: ComponentFile): Component {
  const stateful = c.stateful ?? false;
  const out = {} as Component;
  if (c.command) out.command = [...c.command];
  const dependsOn = c.dependsOn;
  out.dependsOn =
    dependsOn === undefined ? [] : dependsOn.length > 1 ? [...dependsOn].sort() : [...dependsOn];
  out.driver = c.driver;
  out.env = c.env ? normalizeEnv(c.env) : {};
  if (c.health) out.health = normalizeHealth(c.health);
  if (c.image !== undefined) out.image = c.image;
  if (c.network !== undefined) out.network = c.network;
  const labels = c.placement?.labels;
  out.placement = { labels: labels ? sortedRecord(labels) : {} };
  // Ports keep the file's order: the first one serves the component's traffic.
  if (c.ports)
    out.ports = c.ports.map((p) =>
      p.host !== undefined ? { container: p.container, host: p.host } : { container: p.container },
    );
  if (c.image !== undefined) out.pull = c.pull ?? defaults.imagePull;
  out.replicas = c.replicas ?? defaults.replicas;
  if (c.replicate || stateful) out.replicate = normalizeReplicate(c.replicate ?? {});
  if (c.resources) {
    const resources: NonNullable<Component['resources']> = {};
    if (c.resources.cpus !== undefined) resources.cpus = c.resources.cpus;
    if (c.resources.memory !== undefined) resources.memory = c.resources.memory;
    out.resources = resources;
  }
  if (c.run)
    out.run =
      c.run.cwd !== undefined
        ? { command: [...c.run.command], cwd: c.run.cwd }
        : { command: [...c.run.command] };
  out.stateful = stateful;
  if (c.stopTimeout !== undefined) out.stopTimeout = duration(c.stopTimeout, 0);
  if (c.user !== undefined) out.user = c.user;
  out.version = c.version;
  if (c.volumes) out.volumes = [...c.volumes];
  return out;
}

/**
 * A copy in sorted key order; a secret reference becomes a fresh `{ secret }` (its only field), a
 * dependency's `{ format, ref }` with its default format.
 */
function normalizeEnv(env: NonNullable<ComponentFile['env']>): Record<string, ComponentEnvValue> {
  const out: Record<string, ComponentEnvValue> = {};
  const keys = sortedKeys(env);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    const value = env[key] as NonNullable<ComponentFile['env']>[string];
    if (typeof value === 'string') setOwn(out, key, value);
    else if ('ref' in value) setOwn(out, key, { format: value.format ?? defaultRefFormat, ref: value.ref });
    else setOwn(out, key, { secret: value.secret });
  }
  return out;
}

function normalizeReplicate(r: NonNullable<ComponentFile['replicate']>): NonNullable<Component['replicate']> {
  const out = {} as NonNullable<Component['replicate']>;
  if (r.command) out.command = [...r.command];
  if (r.dataDir !== undefined) out.dataDir = r.dataDir;
  out.maxLag = duration(r.maxLag, defaults.replicateMaxLagMs);
  out.timeout = duration(r.timeout, defaults.replicateTimeoutMs);
  // Kept only when given (defaults at use): a layout recorded before them plans no change.
  if (r.writeHold !== undefined) out.writeHold = duration(r.writeHold, defaults.writeHoldMs);
  if (r.maxHeld !== undefined) out.maxHeld = r.maxHeld;
  return out;
}

function normalizeHealth(h: HealthFile): Health {
  if (!h.http && !h.tcp && !h.command) throw new InvariantError('health without a probe passed the checks');
  const out = {} as Health;
  if (h.command) out.command = [...h.command];
  out.deadline = duration(h.deadline, defaults.healthDeadlineMs);
  out.failureThreshold = h.failureThreshold ?? defaults.healthFailureThreshold;
  if (h.http) {
    const expectStatus = h.http.expectStatus ?? defaults.httpExpectStatus;
    const path = h.http.path;
    out.http =
      h.http.bodyMatch !== undefined
        ? { bodyMatch: h.http.bodyMatch, expectStatus, path }
        : { expectStatus, path };
  }
  out.interval = duration(h.interval, defaults.healthIntervalMs);
  out.successThreshold = h.successThreshold ?? defaults.healthSuccessThreshold;
  if (h.tcp) out.tcp = {};
  out.timeout = duration(h.timeout, defaults.healthTimeoutMs);
  return out;
}

function normalizeRoute(r: RouteFile): Route {
  const out = {} as Route;
  out.drain = { timeout: duration(r.drain?.timeout, defaults.drainTimeoutMs) };
  if (r.driver !== undefined) out.driver = r.driver;
  const { shift, holds } = normalizeShift(r.shift ?? defaults.shift);
  if (holds) out.holds = holds;
  out.listen = r.listen.toLowerCase();
  if (r.preview !== undefined) out.preview = r.preview.toLowerCase();
  out.shift = shift;
  out.to = r.to;
  if (r.upstreamTimeout !== undefined) out.upstreamTimeout = duration(r.upstreamTimeout, 0);
  if (r.bodyTimeout !== undefined) out.bodyTimeout = duration(r.bodyTimeout, 0);
  if (r.queueTimeout !== undefined) out.queueTimeout = duration(r.queueTimeout, 0);
  if (r.tls !== undefined) out.tls = normalizeRouteTls(r.tls);
  if (r.h2c === true) out.h2c = true;
  return out;
}

function normalizeRouteTls(t: RouteTlsFile): RouteTls {
  const out = {} as RouteTls;
  out.certificates = t.certificates.map(({ cert, key }) => ({ cert, key }));
  if (t.hsts !== undefined)
    out.hsts = {
      includeSubDomains: t.hsts.includeSubDomains ?? false,
      maxAge: duration(t.hsts.maxAge, 0),
      preload: t.hsts.preload ?? false,
    };
  out.http2 = t.http2 ?? true;
  out.minVersion = t.minVersion ?? 'TLSv1.2';
  if (t.redirectHttp !== undefined) out.redirectHttp = t.redirectHttp.toLowerCase();
  return out;
}

function normalizeNotifyTarget(t: NotifyTargetFile): NotifyTarget {
  const url = (u: string | { secret: string }): NotifyUrl =>
    typeof u === 'string' ? u : { secret: u.secret };
  const out = {} as NotifyTarget;
  if (t.type === 'command') (out as { command: string[] }).command = [...t.command];
  // Events in the order of their names (a set, not a sequence): equal filters, equal models.
  if (t.events !== undefined) out.events = [...(t.events as NotifyEventName[])].sort();
  out.retries = t.retries ?? defaults.notifyRetries;
  out.severity = t.severity ?? defaults.notifySeverity;
  if (t.type === 'webhook')
    (out as { signingSecret: { secret: string } }).signingSecret = { secret: t.signingSecret.secret };
  out.timeout = duration(t.timeout, defaults.notifyTimeoutMs);
  out.type = t.type;
  if (t.type !== 'command') (out as { url: NotifyUrl }).url = url(t.url);
  return out;
}

function duration(text: string | undefined, fallbackMs: number): number {
  if (text === undefined) return fallbackMs;
  const ms = parseDuration(text);
  if (ms === undefined) throw new InvariantError(`duration "${text}" passed the schema but does not parse`);
  return ms;
}

function mapSorted<A, B>(record: Record<string, A>, f: (a: A, key: string) => B): Record<string, B> {
  const out: Record<string, B> = {};
  // Indexes, not for-of: this runs over every component while the code is still cold.
  const keys = sortedKeys(record);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    setOwn(out, key, f(record[key] as A, key));
  }
  return out;
}

/** A copy with the keys in sorted order. Most records are small and already sorted: copied whole. */
function sortedRecord(record: Record<string, string>): Record<string, string> {
  const keys = Object.keys(record);
  if (keys.length === 0) return {};
  if (isSorted(keys)) return { ...record };
  const out: Record<string, string> = {};
  for (const key of keys.sort()) setOwn(out, key, record[key] as string);
  return out;
}

function sortedKeys(record: object): string[] {
  const keys = Object.keys(record);
  return isSorted(keys) ? keys : keys.sort();
}

/** In the order `sort()` gives (UTF-16 code units), so skipping the sort changes nothing. */
function isSorted(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) if ((keys[i - 1] as string) > (keys[i] as string)) return false;
  return true;
}
