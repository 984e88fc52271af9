/**
 * Hosts (issue 30; pure): a driver may name the host whose worker runs its calls (`runsOn`), so that
 * what touches a machine (its processes, its router, its records) runs on that machine. The rule,
 * in full: a component's calls run on its driver's host, a route's on its route driver's host (the
 * built-in router, named by no driver, on any worker); a driver without `runsOn` runs anywhere.
 * `cutover worker` without `--host` is the host `local`, as the local mode is.
 */
import { own } from '../records.js';
import type { PathProblem } from './diagnostic.js';
import type { Topology } from './types.js';

/** The host of a worker started without `--host`, and the only one the local mode runs. */
export const defaultHost = 'local';

const hostPattern = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Why `name` cannot be a host's name (as the schema's `runsOn`), or null. */
export function hostNameProblem(name: string): string | null {
  return hostPattern.test(name)
    ? null
    : 'a host is named with lower-case letters, digits and dashes (at most 63, starting and ending with a letter or digit)';
}

export function driverHost(topology: Topology, driver: string | undefined): string | undefined {
  return driver === undefined ? undefined : own(topology.drivers, driver)?.runsOn;
}

/** Where a component's calls run; undefined: on any worker (or no such component). */
export function componentHost(topology: Topology, component: string): string | undefined {
  return driverHost(topology, own(topology.components, component)?.driver);
}

/** Where a route's calls run; undefined: on any worker (or no such route). */
export function routeHost(topology: Topology, route: string): string | undefined {
  return driverHost(topology, own(topology.routes, route)?.driver);
}

/** Every host the topology's drivers name, sorted. */
export function namedHosts(topology: Topology | null | undefined): string[] {
  const hosts = new Set<string>();
  for (const driver of Object.values(topology?.drivers ?? {})) {
    if (driver.runsOn !== undefined) hosts.add(driver.runsOn);
  }
  return [...hosts].sort();
}

/**
 * A problem at each `drivers.<name>.runsOn` whose host `refuse` refuses (its message), for the
 * caller to locate in the file: the local mode refuses every host but its own, Temporal mode a host
 * no worker polls.
 */
export function runsOnProblems(topology: Topology, refuse: (host: string) => string | null): PathProblem[] {
  const problems: PathProblem[] = [];
  for (const [name, driver] of Object.entries(topology.drivers).sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  )) {
    if (driver.runsOn === undefined) continue;
    const message = refuse(driver.runsOn);
    if (message !== null) problems.push({ path: ['drivers', name, 'runsOn'], message });
  }
  return problems;
}

/** What the local mode says of a host other than its own. */
export function localModeHostProblem(host: string): string | null {
  return host === defaultHost
    ? null
    : `host ${host}: the local mode runs every call on this machine (host ${defaultHost}); run it on Temporal (WORKFLOW_HOST) with \`cutover worker --host ${host}\` on that machine`;
}
