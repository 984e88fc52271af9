import { InvariantError } from '../errors.js';
import { setOwn } from '../records.js';
import { parseDuration } from './duration.js';
import type { ComponentFile, DriverFile, HealthFile, RouteFile, TopologyFile } from './file-types.js';
import type { Component, DriverSpec, Health, Route, Topology } from './types.js';
import { defaults } from './types.js';

/**
 * A checked topology file → the model. Applies defaults, parses durations once, sorts what has no
 * meaningful order, and inserts every record's keys in sorted order, so that equal layouts give equal
 * models and byte-identical JSON whatever the order of the file.
 */
export function normalizeTopology(file: TopologyFile): Topology {
  return {
    apiVersion: 'cutover/v1',
    kind: 'Topology',
    metadata: {
      name: file.metadata.name,
      ...(file.metadata.description !== undefined ? { description: file.metadata.description } : {}),
      labels: sortedRecord(file.metadata.labels ?? {}),
    },
    drivers: mapSorted(file.drivers ?? {}, normalizeDriver),
    components: mapSorted(file.components, normalizeComponent),
    routes: mapSorted(file.routes ?? {}, normalizeRoute),
    strategy: {
      bake: duration(file.strategy?.bake, defaults.bakeMs),
      commit: file.strategy?.commit ?? defaults.commit,
    },
  };
}

function normalizeDriver(driver: DriverFile): DriverSpec {
  switch (driver.type) {
    case 'process':
      return { type: 'process', stopTimeout: duration(driver.stopTimeout, defaults.processStopTimeoutMs) };
    case 'exec':
      return { type: 'exec', dir: driver.dir, timeout: duration(driver.timeout, defaults.execTimeoutMs) };
    case 'router':
      return { type: 'router' };
    case 'nginx':
      return {
        type: 'nginx',
        configFile: driver.configFile,
        reload: driver.reload ?? [...defaults.nginxReload],
      };
  }
}

function normalizeComponent(c: ComponentFile): Component {
  const component: Component = {
    driver: c.driver,
    version: c.version,
    env: sortedRecord(c.env ?? {}),
    replicas: c.replicas ?? defaults.replicas,
    placement: { labels: sortedRecord(c.placement?.labels ?? {}) },
    dependsOn: [...(c.dependsOn ?? [])].sort(),
    stateful: c.stateful ?? false,
  };
  if (c.run)
    component.run = { command: [...c.run.command], ...(c.run.cwd !== undefined ? { cwd: c.run.cwd } : {}) };
  if (c.health) component.health = normalizeHealth(c.health);
  if (c.replicate || component.stateful) {
    const r = c.replicate ?? {};
    component.replicate = sortedKeys({
      maxLag: duration(r.maxLag, defaults.replicateMaxLagMs),
      timeout: duration(r.timeout, defaults.replicateTimeoutMs),
      ...(r.command ? { command: [...r.command] } : {}),
      ...(r.dataDir !== undefined ? { dataDir: r.dataDir } : {}),
    });
  }
  return sortedKeys(component);
}

function normalizeHealth(h: HealthFile): Health {
  let probe: Pick<Health, 'http' | 'tcp' | 'command'>;
  if (h.http) {
    probe = {
      http: sortedKeys({
        path: h.http.path,
        expectStatus: h.http.expectStatus ?? defaults.httpExpectStatus,
        ...(h.http.bodyMatch !== undefined ? { bodyMatch: h.http.bodyMatch } : {}),
      }),
    };
  } else if (h.tcp) {
    probe = { tcp: {} };
  } else if (h.command) {
    probe = { command: [...h.command] };
  } else {
    throw new InvariantError('health without a probe passed the checks');
  }
  return sortedKeys({
    ...probe,
    interval: duration(h.interval, defaults.healthIntervalMs),
    timeout: duration(h.timeout, defaults.healthTimeoutMs),
    successThreshold: h.successThreshold ?? defaults.healthSuccessThreshold,
    failureThreshold: h.failureThreshold ?? defaults.healthFailureThreshold,
    deadline: duration(h.deadline, defaults.healthDeadlineMs),
  });
}

function normalizeRoute(r: RouteFile): Route {
  return sortedKeys({
    listen: r.listen.toLowerCase(),
    to: r.to,
    ...(r.driver !== undefined ? { driver: r.driver } : {}),
    ...(r.preview !== undefined ? { preview: r.preview.toLowerCase() } : {}),
    shift: [...(r.shift ?? defaults.shift)],
    drain: { timeout: duration(r.drain?.timeout, defaults.drainTimeoutMs) },
  });
}

function duration(text: string | undefined, fallbackMs: number): number {
  if (text === undefined) return fallbackMs;
  const ms = parseDuration(text);
  if (ms === undefined) throw new InvariantError(`duration "${text}" passed the schema but does not parse`);
  return ms;
}

function mapSorted<A, B>(record: Record<string, A>, f: (a: A) => B): Record<string, B> {
  const out: Record<string, B> = {};
  for (const key of Object.keys(record).sort()) setOwn(out, key, f(record[key] as A));
  return out;
}

function sortedRecord(record: Record<string, string>): Record<string, string> {
  return mapSorted(record, (v) => v);
}

function sortedKeys<T extends object>(value: T): T {
  const out = {} as Record<string, unknown>;
  for (const key of Object.keys(value).sort()) out[key] = (value as Record<string, unknown>)[key];
  return out as T;
}
