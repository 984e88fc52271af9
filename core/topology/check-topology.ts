import { maxPort, minPort, splitHostPort } from '../host-port.js';
import { has, own } from '../records.js';
import { checkContainerDriver, checkContainerFields, checkPlacement } from './check-container.js';
import { checkInlineCredentials } from './check-credentials.js';
import { checkEnvRefs } from './check-env-refs.js';
import { checkHooks } from './check-hooks.js';
import type { PathProblem } from './diagnostic.js';
import { parseDuration } from './duration.js';
import type { ComponentFile, RouteFile, TopologyFile } from './file-types.js';
import { findCycles, reachesCycle } from './find-cycles.js';
import { checkSharedDwells, checkShiftSteps } from './shift-holds.js';
import { isRouteDriverType, routeDriverTypes } from './types.js';
import { suggest } from './validate-schema.js';

/**
 * Rules the JSON Schema cannot express: references between entries, cycles, address clashes and
 * field combinations. Takes a schema-valid file; returns every problem, never stops at the first.
 *
 * `checked`: components known to pass their own checks with these very drivers (component-reuse.ts:
 * taken over from a file that passed them all, whose drivers were the same). Of those, only what
 * reaches outside the entry is checked: that what `dependsOn` names exists, and, as a cycle needs a
 * component that was not in the acyclic file before, cycles are searched from the others only. The
 * problems found then are a part of the file's, not all of them, and possibly in another order:
 * the caller checks the whole again when there are any.
 */
export function checkTopology(file: TopologyFile, checked?: ReadonlySet<string>): PathProblem[] {
  const problems: PathProblem[] = [];
  // One walk over the components (the bulk of a large file) does the checks of each entry that
  // used to be separate passes; their problems are kept in the order the passes gave them.
  const durationProblems: PathProblem[] = [];
  const edges = new Map<string, readonly string[]>();
  walkComponents(file, problems, durationProblems, edges, checked);
  checkRoutes(file, problems);
  checkRouteHosts(file, problems);
  forEachEntry(file.drivers, (name, driver) => problems.push(...checkContainerDriver(name, driver)));
  forEachEntry(file.drivers, (name, driver) => {
    if (driver.type === 'process') checkProcessAddress(name, driver.address, problems);
  });
  if (checked === undefined) checkCycles(edges, problems);
  else checkCyclesFrom(edges, checked, problems);
  problems.push(...checkEnvRefs(file, checked));
  checkDurations(file, problems, durationProblems);
  problems.push(...checkHooks(file.strategy?.hooks));
  problems.push(...checkInlineCredentials(file));
  return problems;
}

/**
 * A process driver's `address` (the schema checks its shape): one address a router can dial, so
 * not a wildcard, and an IPv4 address with octets a byte each.
 */
function checkProcessAddress(name: string, address: string | undefined, problems: PathProblem[]): void {
  if (address === undefined) return;
  const path = ['drivers', name, 'address'];
  if (address === '0.0.0.0' || /^[0:]*$/.test(address)) {
    problems.push({
      path,
      message: `is ${address}, every address: give the one address its replicas are reached at (a router dials it)`,
    });
  } else if (!address.includes(':') && address.split('.').some((octet) => Number(octet) > 255)) {
    problems.push({ path, message: `is not an IPv4 address: ${address}` });
  }
}

/** The longest duration cutover accepts anywhere: a year. */
export const maxDurationMs = 365 * 24 * 3_600_000;
const durationSyntax = /^([0-9]+(ms|s|m|h))+$/;

/** A duration field that is written but longer than a year (the schema checks how it is written). */
function isTooLong(text: string | undefined): boolean {
  if (text === undefined) return false;
  const ms = parseDuration(text);
  return ms !== undefined ? ms > maxDurationMs : durationSyntax.test(text);
}

/** The schema checks how durations are written; this checks their size, in every duration field. */
function checkDurations(file: TopologyFile, problems: PathProblem[], componentProblems: PathProblem[]): void {
  const check = (text: string | undefined, path: () => (string | number)[]) => {
    if (isTooLong(text)) problems.push({ path: path(), message: 'is too long: at most 8760h (a year)' });
  };
  check(file.strategy?.bake, () => ['strategy', 'bake']);
  check(file.strategy?.hostWait, () => ['strategy', 'hostWait']);
  const hostWait = file.strategy?.hostWait === undefined ? undefined : parseDuration(file.strategy.hostWait);
  if (hostWait !== undefined && hostWait < 1_000) {
    problems.push({
      path: ['strategy', 'hostWait'],
      message: 'is too short: at least 1s (a worker needs a moment to take a call)',
    });
  }
  forEachEntry(file.drivers, (name, d) => {
    if (d.type === 'process') check(d.stopTimeout, () => ['drivers', name, 'stopTimeout']);
    if (d.type === 'exec') check(d.timeout, () => ['drivers', name, 'timeout']);
    if (d.type === 'container') check(d.stopTimeout, () => ['drivers', name, 'stopTimeout']);
  });
  for (const p of componentProblems) problems.push(p);
  forEachEntry(file.routes, (name, r) => check(r.drain?.timeout, () => ['routes', name, 'drain', 'timeout']));
}

const noNames: readonly unknown[] = [];

function pushAll(problems: PathProblem[], more: readonly PathProblem[]): void {
  for (let i = 0; i < more.length; i++) problems.push(more[i] as PathProblem);
}

const healthDurationFields = ['interval', 'timeout', 'deadline'] as const;
const replicateDurationFields = ['maxLag', 'timeout', 'writeHold'] as const;

function componentDurations(name: string, c: ComponentFile, out: PathProblem[]): void {
  // `?.` as the separate pass had it: a null health or replicate has no durations to check.
  const health = c.health;
  if (health !== undefined && health !== null) {
    for (let f = 0; f < healthDurationFields.length; f++) {
      const field = healthDurationFields[f] as (typeof healthDurationFields)[number];
      if (isTooLong(health[field])) {
        out.push({
          path: ['components', name, 'health', field],
          message: 'is too long: at most 8760h (a year)',
        });
      }
    }
  }
  if (isTooLong(c.stopTimeout)) {
    out.push({ path: ['components', name, 'stopTimeout'], message: 'is too long: at most 8760h (a year)' });
  }
  const replicate = c.replicate;
  if (replicate !== undefined && replicate !== null) {
    for (let f = 0; f < replicateDurationFields.length; f++) {
      const field = replicateDurationFields[f] as (typeof replicateDurationFields)[number];
      if (isTooLong(replicate[field])) {
        out.push({
          path: ['components', name, 'replicate', field],
          message: 'is too long: at most 8760h (a year)',
        });
      }
    }
  }
}

/**
 * Per component: references, field combinations, duration sizes and dependency edges. Each part
 * is guarded on its own, as separate passes would be: on a file the schema rejected, an entry too
 * malformed for one part is still checked by the others.
 */
function walkComponents(
  file: TopologyFile,
  problems: PathProblem[],
  durationProblems: PathProblem[],
  edges: Map<string, readonly string[]>,
  checked: ReadonlySet<string> | undefined,
): void {
  const drivers = file.drivers ?? {};
  const components = file.components;
  const names = Object.keys(components); // throws, as before, when there are no components at all
  for (let n = 0; n < names.length; n++) {
    const name = names[n] as string;
    const component = components[name] as ComponentFile;
    if (checked?.has(name)) {
      // Passed before, so its `dependsOn` is a list of other components' names: do they exist here?
      const deps = component.dependsOn ?? [];
      for (let i = 0; i < deps.length; i++) {
        if (!has(components, deps[i] as string)) {
          problems.push({ path: ['components', name, 'dependsOn', i], message: 'unknown component' });
        }
      }
      edges.set(name, deps);
      continue;
    }
    try {
      checkComponent(file, drivers, names, name, component, problems);
    } catch {
      // Malformed entry; the schema errors already describe it.
    }
    try {
      componentDurations(name, component, durationProblems);
    } catch {
      // Malformed entry, as above.
    }
    try {
      const deps = Array.isArray(component.dependsOn) ? component.dependsOn : noNames;
      const targets: string[] = [];
      for (let i = 0; i < deps.length; i++) {
        const d = deps[i];
        if (typeof d === 'string' && d !== name) targets.push(d);
      }
      edges.set(name, targets);
    } catch {
      // Malformed entry, as above.
    }
  }
}

function checkComponent(
  file: TopologyFile,
  drivers: NonNullable<TopologyFile['drivers']>,
  componentNames: readonly string[],
  name: string,
  component: ComponentFile,
  problems: PathProblem[],
): void {
  const driver = own(drivers, component.driver);
  if (!driver) {
    problems.push({
      path: ['components', name, 'driver'],
      message: unknownName('driver', component.driver, Object.keys(drivers)),
    });
  } else if (
    driver.type !== 'process' &&
    driver.type !== 'exec' &&
    driver.type !== 'container' &&
    driver.type !== 'postgres' &&
    driver.type !== 'redis'
  ) {
    problems.push({
      path: ['components', name, 'driver'],
      message: `driver "${component.driver}" is of type ${driver.type}; components need a process, exec, container, postgres or redis driver`,
    });
  } else if (driver.type === 'postgres' && component.replicas !== undefined && component.replicas !== 1) {
    problems.push({
      path: ['components', name, 'replicas'],
      message: 'must be 1 for a component on a postgres driver (one cluster per slot)',
    });
  } else if (driver.type === 'redis' && component.replicas !== undefined && component.replicas !== 1) {
    problems.push({
      path: ['components', name, 'replicas'],
      message: 'must be 1 for a component on a redis driver (one redis-server per slot)',
    });
  } else if (driver.type === 'process' && !component.run) {
    problems.push({
      path: ['components', name, 'run'],
      message: 'is required for a component on a process driver',
    });
  }
  // Without a spread of empty lists: this runs for every component, mostly before the JIT warms up.
  if (driver) pushAll(problems, checkContainerFields(name, component, driver.type));
  pushAll(problems, checkPlacement(name, component, driver));
  const dependsOn = component.dependsOn ?? [];
  // Not a list: the rest of this entry is left unchecked, as `dependsOn.forEach` throwing left it.
  if (!Array.isArray(dependsOn)) throw new TypeError('dependsOn is not a list');
  for (let i = 0; i < dependsOn.length; i++) {
    const dep = dependsOn[i] as string;
    if (dep === name) {
      problems.push({
        path: ['components', name, 'dependsOn', i],
        message: 'a component cannot depend on itself',
      });
    } else if (!has(file.components, dep)) {
      problems.push({
        path: ['components', name, 'dependsOn', i],
        message: unknownName('component', dep, componentNames),
      });
    }
  }
  const health = component.health;
  if (health) {
    const probes =
      (health.http !== undefined ? 1 : 0) +
      (health.tcp !== undefined ? 1 : 0) +
      (health.command !== undefined ? 1 : 0);
    if (probes !== 1) {
      problems.push({
        path: ['components', name, 'health'],
        message:
          probes === 0
            ? 'needs one probe: http, tcp or command'
            : `has ${(['http', 'tcp', 'command'] as const).filter((k) => health[k] !== undefined).join(' and ')}; give exactly one probe`,
      });
    }
    for (let f = 0; f < healthDurationFields.length; f++) {
      const field = healthDurationFields[f] as (typeof healthDurationFields)[number];
      const text = health[field];
      if (text !== undefined && parseDuration(text) === 0) {
        problems.push({ path: ['components', name, 'health', field], message: 'must be longer than 0s' });
      }
    }
    if (health.http?.bodyMatch !== undefined && !isRegExp(health.http.bodyMatch)) {
      problems.push({
        path: ['components', name, 'health', 'http', 'bodyMatch'],
        message: 'is not a valid regular expression',
      });
    }
  }
  if (component.replicate && component.stateful !== true) {
    problems.push({
      path: ['components', name, 'replicate'],
      message: 'is set but the component is not stateful: true',
    });
  }
}

/**
 * Runs a check per entry. On a schema-valid file nothing throws; when the schema already failed,
 * an entry too malformed to check is skipped and the other entries are still checked.
 */
function forEachEntry<T>(
  record: Record<string, T> | undefined,
  check: (name: string, value: T) => void,
): void {
  for (const [name, value] of Object.entries(record ?? {})) {
    try {
      check(name, value);
    } catch {
      // Malformed entry; the schema errors already describe it.
    }
  }
}

/**
 * Routes may run on several hosts (a router per host), each shift step setting each host's routes
 * in a call on that host. What must happen on the routes together cannot be split so: an analysed
 * hold judges its routes' traffic as one, so with an `analysis` step every route runs on one host
 * (as does a stateful switch's write hold, refused when the migration is prepared). A route whose
 * driver names no host (the built-in router, on any worker) beside routes on hosts would be
 * served from whichever machine's worker took the call: refused too.
 */
function checkRouteHosts(file: TopologyFile, problems: PathProblem[]): void {
  const drivers = file.drivers ?? {};
  const hostOf = (driver: string | undefined) =>
    driver === undefined ? undefined : own(drivers, driver)?.runsOn;
  let first: { route: string; host: string } | undefined;
  let analysed: string | undefined;
  forEachEntry(file.routes, (name, route) => {
    const host = hostOf(route.driver);
    if (first === undefined && host !== undefined) first = { route: name, host };
    if (
      analysed === undefined &&
      (route.shift ?? []).some((step) => typeof step === 'object' && step?.analysis !== undefined)
    )
      analysed = name;
  });
  if (first === undefined) return;
  const { route: firstRoute, host } = first;
  forEachEntry(file.routes, (name, route) => {
    const here = hostOf(route.driver);
    if (here === host) return;
    if (here === undefined) {
      problems.push({
        path: ['routes', name, 'driver'],
        message:
          route.driver === undefined
            ? `the built-in router runs on any worker, and route ${firstRoute}'s driver on host ${host}: name a router driver with runsOn for this route too`
            : `driver "${route.driver}" runs on any worker, and route ${firstRoute}'s on host ${host}: give it runsOn too`,
      });
    } else if (analysed !== undefined) {
      problems.push({
        path: ['routes', name, 'driver'],
        message: `driver "${route.driver}" runs on host ${here}, and route ${firstRoute}'s on host ${host}: with an analysed shift step (route ${analysed}) the routes of a topology run on one host (the analysis judges them together)`,
      });
    }
  });
}

function checkRoutes(file: TopologyFile, problems: PathProblem[]): void {
  const drivers = file.drivers ?? {};
  const componentNames = Object.keys(file.components);
  const listeners = new Map<number, Listener[]>(); // by port
  forEachEntry(file.routes, (name, route) => {
    const at = ['routes', name];
    for (const key of ['upstreamTimeout', 'bodyTimeout', 'queueTimeout'] as const) {
      const value = route[key];
      if (value !== undefined && parseDuration(value) === 0)
        problems.push({ path: [...at, key], message: 'must be longer than 0s' });
    }
    if (!has(file.components, route.to)) {
      problems.push({ path: [...at, 'to'], message: unknownName('component', route.to, componentNames) });
    }
    if (route.driver !== undefined) {
      const driver = own(drivers, route.driver);
      if (!driver) {
        problems.push({
          path: [...at, 'driver'],
          message: unknownName('driver', route.driver, Object.keys(drivers)),
        });
      } else if (!isRouteDriverType(driver.type)) {
        problems.push({
          path: [...at, 'driver'],
          message: `driver "${route.driver}" is of type ${driver.type}; routes need a ${routeDriverTypes.slice(0, -1).join(', ')} or ${routeDriverTypes.at(-1)} driver`,
        });
      }
    }
    checkRouteTls(
      route,
      at,
      route.driver === undefined ? 'router' : own(drivers, route.driver)?.type,
      problems,
    );
    const addresses: [string | undefined, (string | number)[]][] = [
      [route.listen, [...at, 'listen']],
      [route.preview, [...at, 'preview']],
      [route.tls?.redirectHttp, [...at, 'tls', 'redirectHttp']],
    ];
    for (const [address, where] of addresses) {
      const field = where.slice(2).join('.');
      if (address === undefined) continue;
      // The schema reports an address that is not host:port at all.
      const split = splitHostPort(address);
      if (!split) continue;
      if (split.port < minPort || split.port > maxPort) {
        problems.push({
          path: where,
          message: `port ${split.port} is out of range ${minPort}-${maxPort}`,
        });
        continue;
      }
      const listener = { host: split.host.toLowerCase(), port: split.port, where: `routes.${name}.${field}` };
      const clash = findClash(listeners, listener);
      if (clash) problems.push({ path: where, message: `address ${address} is already used by ${clash}` });
      else {
        const samePort = listeners.get(listener.port);
        if (samePort) samePort.push(listener);
        else listeners.set(listener.port, [listener]);
      }
    }
    if (route.shift) checkShiftSteps(route.shift, [...at, 'shift'], problems);
  });
  checkSharedDwells(
    Object.entries(file.routes ?? {}).map(([name, route]) => [name, route?.shift] as const),
    problems,
  );
}

/** TLS and h2c are the built-in router's: nginx's driver would serve the route without them. */
function checkRouteTls(
  route: RouteFile,
  at: (string | number)[],
  driverType: string | undefined,
  problems: PathProblem[],
): void {
  for (const key of ['tls', 'h2c'] as const) {
    if (route[key] === undefined || driverType === undefined || driverType === 'router') continue;
    problems.push({
      path: [...at, key],
      message: `only the built-in router serves ${key === 'tls' ? 'TLS' : 'h2c'}; driver "${route.driver}" is of type ${driverType}`,
    });
  }
  if (route.tls !== undefined && route.h2c === true)
    problems.push({
      path: [...at, 'h2c'],
      message: 'h2c is HTTP/2 without TLS: over tls, HTTP/2 is offered by ALPN (tls.http2)',
    });
  const maxAge = route.tls?.hsts?.maxAge;
  if (maxAge !== undefined && (parseDuration(maxAge) ?? 0) < 1000)
    problems.push({ path: [...at, 'tls', 'hsts', 'maxAge'], message: 'must be at least 1s' });
}

interface Listener {
  /** Lower case, IPv6 without brackets. */
  host: string;
  port: number;
  /** `routes.<name>.listen` or `.preview`. */
  where: string;
}

/** Two listeners clash on the same host and port, or on the same port when either is a wildcard. */
function findClash(
  listeners: ReadonlyMap<number, readonly Listener[]>,
  address: Listener,
): string | undefined {
  const wildcard = (host: string) => host === '0.0.0.0' || host === '::';
  const samePort = listeners.get(address.port) ?? [];
  return (
    samePort.find((other) => other.host === address.host)?.where ??
    samePort.find((other) => wildcard(address.host) || wildcard(other.host))?.where
  );
}

/** Whether a cycle is reachable from a component not in `checked` (a part of the problems: see checkTopology). */
function checkCyclesFrom(
  edges: ReadonlyMap<string, readonly string[]>,
  checked: ReadonlySet<string>,
  problems: PathProblem[],
): void {
  const from: string[] = [];
  edges.forEach((_, name) => {
    if (!checked.has(name)) from.push(name);
  });
  const at = reachesCycle(edges, from);
  if (at !== undefined) problems.push({ path: ['components', at, 'dependsOn'], message: 'dependency cycle' });
}

function checkCycles(edges: ReadonlyMap<string, readonly string[]>, problems: PathProblem[]): void {
  // Most files have no cycle: a walk in file order says so without findCycles' sorting and indexing,
  // which only the report of the cycles needs.
  if (reachesCycle(edges, [...edges.keys()]) === undefined) return;
  for (const cycle of findCycles(edges)) {
    const first = cycle[0] as string;
    problems.push({
      path: ['components', first, 'dependsOn'],
      message: `dependency cycle: ${cycle.join(' → ')}`,
    });
  }
}

function unknownName(kind: string, name: string, known: readonly string[]): string {
  const hint = suggest(name, known);
  if (hint) return `unknown ${kind} "${name}"; did you mean "${hint}"?`;
  const list =
    known.length === 0 ? 'none are defined' : `defined: ${[...known].sort().slice(0, 10).join(', ')}`;
  return `unknown ${kind} "${name}" (${list}${known.length > 10 ? ', …' : ''})`;
}

function isRegExp(source: string): boolean {
  try {
    new RegExp(source);
    return true;
  } catch {
    return false;
  }
}
