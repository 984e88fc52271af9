import { has, own } from '../records.js';
import type { PathProblem } from './diagnostic.js';
import { parseDuration } from './duration.js';
import type { TopologyFile } from './file-types.js';
import { findCycles } from './find-cycles.js';
import { suggest } from './validate-schema.js';

/**
 * Rules the JSON Schema cannot express: references between entries, cycles, address clashes and
 * field combinations. Takes a schema-valid file; returns every problem, never stops at the first.
 */
export function checkTopology(file: TopologyFile): PathProblem[] {
  const problems: PathProblem[] = [];
  checkComponents(file, problems);
  checkRoutes(file, problems);
  checkCycles(file, problems);
  checkDurations(file, problems);
  return problems;
}

/** The longest duration cutover accepts anywhere: a year. */
export const maxDurationMs = 365 * 24 * 3_600_000;
const durationSyntax = /^([0-9]+(ms|s|m|h))+$/;

/** The schema checks how durations are written; this checks their size, in every duration field. */
function checkDurations(file: TopologyFile, problems: PathProblem[]): void {
  const check = (text: string | undefined, path: (string | number)[]) => {
    if (text === undefined) return;
    const ms = parseDuration(text);
    if (ms !== undefined ? ms > maxDurationMs : durationSyntax.test(text)) {
      problems.push({ path, message: 'is too long: at most 8760h (a year)' });
    }
  };
  check(file.strategy?.bake, ['strategy', 'bake']);
  forEachEntry(file.drivers, (name, d) => {
    if (d.type === 'process') check(d.stopTimeout, ['drivers', name, 'stopTimeout']);
    if (d.type === 'exec') check(d.timeout, ['drivers', name, 'timeout']);
  });
  forEachEntry(file.components, (name, c) => {
    for (const field of ['interval', 'timeout', 'deadline'] as const)
      check(c.health?.[field], ['components', name, 'health', field]);
    for (const field of ['maxLag', 'timeout'] as const)
      check(c.replicate?.[field], ['components', name, 'replicate', field]);
  });
  forEachEntry(file.routes, (name, r) => check(r.drain?.timeout, ['routes', name, 'drain', 'timeout']));
}

function checkComponents(file: TopologyFile, problems: PathProblem[]): void {
  const drivers = file.drivers ?? {};
  const componentNames = Object.keys(file.components);
  forEachEntry(file.components, (name, component) => {
    const at = ['components', name];
    const driver = own(drivers, component.driver);
    if (!driver) {
      problems.push({
        path: [...at, 'driver'],
        message: unknownName('driver', component.driver, Object.keys(drivers)),
      });
    } else if (driver.type !== 'process' && driver.type !== 'exec') {
      problems.push({
        path: [...at, 'driver'],
        message: `driver "${component.driver}" is of type ${driver.type}; components need a process or exec driver`,
      });
    } else if (driver.type === 'process' && !component.run) {
      problems.push({ path: [...at, 'run'], message: 'is required for a component on a process driver' });
    }
    (component.dependsOn ?? []).forEach((dep, i) => {
      if (dep === name)
        problems.push({ path: [...at, 'dependsOn', i], message: 'a component cannot depend on itself' });
      else if (!has(file.components, dep)) {
        problems.push({
          path: [...at, 'dependsOn', i],
          message: unknownName('component', dep, componentNames),
        });
      }
    });
    const health = component.health;
    if (health) {
      const probes = (['http', 'tcp', 'command'] as const).filter((k) => health[k] !== undefined);
      if (probes.length !== 1) {
        problems.push({
          path: [...at, 'health'],
          message:
            probes.length === 0
              ? 'needs one probe: http, tcp or command'
              : `has ${probes.join(' and ')}; give exactly one probe`,
        });
      }
      for (const field of ['interval', 'timeout', 'deadline'] as const) {
        const text = health[field];
        if (text !== undefined && parseDuration(text) === 0) {
          problems.push({ path: [...at, 'health', field], message: 'must be longer than 0s' });
        }
      }
      if (health.http?.bodyMatch !== undefined && !isRegExp(health.http.bodyMatch)) {
        problems.push({
          path: [...at, 'health', 'http', 'bodyMatch'],
          message: 'is not a valid regular expression',
        });
      }
    }
    if (component.replicate && component.stateful !== true) {
      problems.push({
        path: [...at, 'replicate'],
        message: 'is set but the component is not stateful: true',
      });
    }
  });
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

function checkRoutes(file: TopologyFile, problems: PathProblem[]): void {
  const drivers = file.drivers ?? {};
  const componentNames = Object.keys(file.components);
  const listeners = new Map<string, string>(); // "host:port" → "routes.x.listen"
  forEachEntry(file.routes, (name, route) => {
    const at = ['routes', name];
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
      } else if (driver.type !== 'router' && driver.type !== 'nginx') {
        problems.push({
          path: [...at, 'driver'],
          message: `driver "${route.driver}" is of type ${driver.type}; routes need a router or nginx driver`,
        });
      }
    }
    for (const field of ['listen', 'preview'] as const) {
      const address = route[field];
      if (address === undefined) continue;
      const port = Number(address.slice(address.lastIndexOf(':') + 1));
      if (port < 1 || port > 65535) {
        problems.push({ path: [...at, field], message: `port ${port} is out of range 1-65535` });
        continue;
      }
      const clash = findClash(listeners, address);
      const here = `routes.${name}.${field}`;
      if (clash)
        problems.push({ path: [...at, field], message: `address ${address} is already used by ${clash}` });
      else listeners.set(address.toLowerCase(), here);
    }
    const shift = route.shift;
    if (shift) {
      for (let i = 1; i < shift.length; i++) {
        if ((shift[i] as number) <= (shift[i - 1] as number)) {
          problems.push({ path: [...at, 'shift', i], message: 'steps must increase' });
        }
      }
      if (shift[shift.length - 1] !== 100) {
        problems.push({ path: [...at, 'shift', shift.length - 1], message: 'the last step must be 100' });
      }
    }
  });
}

/** Two listeners clash on the same host and port, or on the same port when either is a wildcard. */
function findClash(listeners: Map<string, string>, address: string): string | undefined {
  const key = address.toLowerCase();
  const exact = listeners.get(key);
  if (exact) return exact;
  const sep = key.lastIndexOf(':');
  const host = key.slice(0, sep);
  const port = key.slice(sep + 1);
  const wildcard = (h: string) => h === '0.0.0.0' || h === '[::]';
  for (const [other, where] of listeners) {
    const otherSep = other.lastIndexOf(':');
    if (other.slice(otherSep + 1) !== port) continue;
    if (wildcard(host) || wildcard(other.slice(0, otherSep))) return where;
  }
  return undefined;
}

function checkCycles(file: TopologyFile, problems: PathProblem[]): void {
  const edges = new Map<string, string[]>();
  forEachEntry(file.components, (name, component) => {
    const deps = Array.isArray(component.dependsOn) ? component.dependsOn : [];
    edges.set(
      name,
      deps.filter((d) => typeof d === 'string' && d !== name),
    );
  });
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
