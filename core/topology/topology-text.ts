/**
 * A topology model written back as a topology file (JSON, which YAML reads): what lets cutover run
 * a migration of a layout it recorded (self-heal, a rollback to an earlier layout) through the
 * same start path as a file. The model keeps the file's shape except durations, which it holds in
 * milliseconds and the file writes as text (`1500ms`).
 *
 * Invariant (a test holds it): loading `topologyText(model)` gives back `model`, deep-equal, so
 * the plan of the text is the plan of the model.
 */
import type { Component, DriverSpec, Health, Replicate, Route, Topology } from './types.js';

const ms = (value: number): string => `${value}ms`;

export function topologyText(model: Topology): string {
  return `${JSON.stringify(topologyFileOf(model), null, 2)}\n`;
}

function topologyFileOf(model: Topology): Record<string, unknown> {
  return {
    apiVersion: model.apiVersion,
    kind: model.kind,
    metadata: model.metadata,
    drivers: mapValues(model.drivers, driverFile),
    components: mapValues(model.components, componentFile),
    routes: mapValues(model.routes, routeFile),
    strategy: { bake: ms(model.strategy.bake), commit: model.strategy.commit },
  };
}

function driverFile(driver: DriverSpec): Record<string, unknown> {
  switch (driver.type) {
    case 'process':
      return { type: driver.type, stopTimeout: ms(driver.stopTimeout) };
    case 'exec':
      return { type: driver.type, dir: driver.dir, timeout: ms(driver.timeout) };
    case 'router':
      return { type: driver.type };
    case 'nginx':
      return { type: driver.type, configFile: driver.configFile, reload: driver.reload };
  }
}

function componentFile(c: Component): Record<string, unknown> {
  const out: Record<string, unknown> = { ...c };
  if (c.health) out.health = healthFile(c.health);
  if (c.replicate) out.replicate = replicateFile(c.replicate);
  return out;
}

function healthFile(h: Health): Record<string, unknown> {
  return {
    ...h,
    interval: ms(h.interval),
    timeout: ms(h.timeout),
    deadline: ms(h.deadline),
  };
}

function replicateFile(r: Replicate): Record<string, unknown> {
  return { ...r, maxLag: ms(r.maxLag), timeout: ms(r.timeout) };
}

function routeFile(r: Route): Record<string, unknown> {
  const out: Record<string, unknown> = { ...r, drain: { timeout: ms(r.drain.timeout) } };
  if (r.upstreamTimeout !== undefined) out.upstreamTimeout = ms(r.upstreamTimeout);
  if (r.bodyTimeout !== undefined) out.bodyTimeout = ms(r.bodyTimeout);
  if (r.queueTimeout !== undefined) out.queueTimeout = ms(r.queueTimeout);
  return out;
}

/** Copies a record of user-chosen names without reaching Object.prototype (`__proto__` stays a key). */
function mapValues<A, B>(record: Record<string, A>, f: (a: A) => B): Record<string, B> {
  const out: Record<string, B> = {};
  for (const [key, value] of Object.entries(record)) {
    Object.defineProperty(out, key, {
      value: f(value),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}
