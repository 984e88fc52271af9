import { setOwn } from '../records.js';
import { formatDuration } from './duration.js';
import type {
  ComponentFile,
  DriverFile,
  HealthFile,
  NotifyTargetFile,
  RouteFile,
  TopologyFile,
} from './file-types.js';
import { hooksFileOf } from './hook-types.js';
import { shiftFileOf } from './shift-holds.js';
import type { Component, DriverSpec, Health, NotifyTarget, Route, Topology } from './types.js';

/**
 * The model → a topology file that loads back to the same model: the way a recorded layout (kept
 * as a model, durations in milliseconds) becomes something `migrate` can run again, for
 * `cutover topology rollback` and for self-heal. Every default is written out, so the file does not
 * depend on the defaults of the version that reads it. Pure.
 *
 * Invariant (a property test holds it): `loadTopology(topologyText(m, name)).topology` deep-equals
 * `m`, secret references (`{ secret: NAME }`) included: the model holds their names, never values;
 * references to dependencies (`{ format, ref }`) too: the model holds the format, never an address.
 */
export function topologyFileOf(model: Topology): TopologyFile {
  const metadata: TopologyFile['metadata'] = { name: model.metadata.name, labels: model.metadata.labels };
  if (model.metadata.description !== undefined) metadata.description = model.metadata.description;
  return {
    apiVersion: model.apiVersion,
    kind: model.kind,
    metadata,
    drivers: mapValues(model.drivers, driverFile),
    components: mapValues(model.components, componentFile),
    routes: mapValues(model.routes, routeFile),
    strategy: {
      bake: formatDuration(model.strategy.bake),
      commit: model.strategy.commit,
      ...(model.strategy.parallelism === undefined ? {} : { parallelism: model.strategy.parallelism }),
      ...(model.strategy.hostWait === undefined ? {} : { hostWait: formatDuration(model.strategy.hostWait) }),
      ...(model.strategy.hooks === undefined ? {} : { hooks: hooksFileOf(model.strategy.hooks) }),
    },
    ...(model.notify === undefined ? {} : { notify: mapValues(model.notify, notifyTargetFile) }),
  };
}

function notifyTargetFile(t: NotifyTarget): NotifyTargetFile {
  const { timeout, events, ...rest } = t;
  return {
    ...rest,
    ...(events === undefined ? {} : { events: [...events] }),
    timeout: formatDuration(timeout),
  } as NotifyTargetFile;
}

/**
 * The file as text the loader reads: JSON, which is YAML too. `name` says where it came from, in
 * a comment line that YAML ignores.
 */
export function topologyText(model: Topology, name: string): string {
  return `# ${name.replaceAll('\n', ' ')}\n${JSON.stringify(topologyFileOf(model), null, 2)}\n`;
}

function driverFile(driver: DriverSpec): DriverFile {
  const file = driverFields(driver);
  return driver.runsOn === undefined ? file : { ...file, runsOn: driver.runsOn };
}

function driverFields(driver: DriverSpec): DriverFile {
  switch (driver.type) {
    case 'process':
      return {
        type: 'process',
        ...(driver.address !== undefined ? { address: driver.address } : {}),
        stopTimeout: formatDuration(driver.stopTimeout),
      };
    case 'exec':
      return { type: 'exec', dir: driver.dir, timeout: formatDuration(driver.timeout) };
    case 'container': {
      const { stopTimeout, ...rest } = driver;
      return { ...rest, stopTimeout: formatDuration(stopTimeout) };
    }
    case 'postgres':
    case 'redis':
      return { ...driver };
    case 'router':
      return { type: 'router' };
    case 'nginx':
      return { type: 'nginx', configFile: driver.configFile, reload: [...driver.reload] };
    case 'haproxy':
    case 'caddy':
      return { ...driver };
  }
}

function componentFile(c: Component): ComponentFile {
  const out: ComponentFile = {
    driver: c.driver,
    version: c.version,
    env: c.env,
    replicas: c.replicas,
    placement: { labels: c.placement.labels },
    dependsOn: c.dependsOn,
    stateful: c.stateful,
  };
  if (c.run) out.run = c.run;
  if (c.image !== undefined) out.image = c.image;
  if (c.command) out.command = c.command;
  if (c.ports) out.ports = c.ports;
  if (c.volumes) out.volumes = c.volumes;
  if (c.resources) out.resources = c.resources;
  if (c.user !== undefined) out.user = c.user;
  if (c.network !== undefined) out.network = c.network;
  if (c.pull !== undefined) out.pull = c.pull;
  if (c.stopTimeout !== undefined) out.stopTimeout = formatDuration(c.stopTimeout);
  if (c.health) out.health = healthFile(c.health);
  if (c.replicate) {
    const r = c.replicate;
    out.replicate = { maxLag: formatDuration(r.maxLag), timeout: formatDuration(r.timeout) };
    if (r.writeHold !== undefined) out.replicate.writeHold = formatDuration(r.writeHold);
    if (r.maxHeld !== undefined) out.replicate.maxHeld = r.maxHeld;
    if (r.command) out.replicate.command = r.command;
    if (r.dataDir !== undefined) out.replicate.dataDir = r.dataDir;
  }
  return out;
}

function healthFile(h: Health): HealthFile {
  const out: HealthFile = {
    interval: formatDuration(h.interval),
    timeout: formatDuration(h.timeout),
    successThreshold: h.successThreshold,
    failureThreshold: h.failureThreshold,
    deadline: formatDuration(h.deadline),
  };
  if (h.http) out.http = h.http;
  if (h.tcp) out.tcp = h.tcp;
  if (h.command) out.command = h.command;
  return out;
}

function routeFile(r: Route): RouteFile {
  const out: RouteFile = {
    listen: r.listen,
    to: r.to,
    shift: shiftFileOf(r),
    drain: { timeout: formatDuration(r.drain.timeout) },
  };
  if (r.driver !== undefined) out.driver = r.driver;
  if (r.preview !== undefined) out.preview = r.preview;
  if (r.upstreamTimeout !== undefined) out.upstreamTimeout = formatDuration(r.upstreamTimeout);
  if (r.bodyTimeout !== undefined) out.bodyTimeout = formatDuration(r.bodyTimeout);
  if (r.queueTimeout !== undefined) out.queueTimeout = formatDuration(r.queueTimeout);
  if (r.tls !== undefined) {
    const { hsts, ...rest } = r.tls;
    out.tls = {
      ...rest,
      certificates: r.tls.certificates.map((c) => ({ ...c })),
      ...(hsts ? { hsts: { ...hsts, maxAge: formatDuration(hsts.maxAge) } } : {}),
    };
  }
  if (r.h2c) out.h2c = true;
  return out;
}

function mapValues<A, B>(record: Record<string, A>, f: (a: A) => B): Record<string, B> {
  const out: Record<string, B> = {};
  for (const [key, value] of Object.entries(record)) setOwn(out, key, f(value));
  return out;
}
