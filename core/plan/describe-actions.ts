import { formatDuration } from '../topology/duration.js';
import type { Component, Route } from '../topology/types.js';
import { shiftSteps } from './shift-steps.js';

/** One-line reasons for actions whose reason is not a list of changes. */

export function newComponentReason(c: Component): string {
  const replicas = c.replicas === 1 ? '1 replica' : `${c.replicas} replicas`;
  return `new component (version ${c.version}, ${replicas}, driver ${c.driver})`;
}

export function replicateReason(name: string, c: Component): string {
  const r = c.replicate;
  const bounds = r ? ` (max lag ${formatDuration(r.maxLag)}, timeout ${formatDuration(r.timeout)})` : '';
  return `copy the state of ${name} from blue to green${bounds}`;
}

export function healthReason(c: Component): string {
  if (!c.health) return 'no health check configured: green must start and stay up';
  return probeReason(c.health);
}

/** The gate after a restart in place: the same checks, of the live slot's restarted replicas. */
export function restartHealthReason(c: Component): string {
  if (!c.health) return 'restarted replicas must start and stay up (no health check configured)';
  return `restarted replicas: ${probeReason(c.health)}`;
}

function probeReason(h: NonNullable<Component['health']>): string {
  let probe: string;
  if (h.http) {
    probe = `http GET ${h.http.path} expects ${h.http.expectStatus}${h.http.bodyMatch ? ` and body /${h.http.bodyMatch}/` : ''}`;
  } else if (h.command) {
    probe = `command ${h.command.join(' ')} exits 0`;
  } else {
    probe = 'tcp connect';
  }
  const successes = h.successThreshold === 1 ? '1 success' : `${h.successThreshold} successes in a row`;
  return `${probe}; ${successes} on every replica within ${formatDuration(h.deadline)}`;
}

export function shiftReason(route: Route): string {
  return `shift ${route.listen} to green ${route.to}: ${describeSteps(route.shift)}`;
}

/** Several routes moved as one: "shift www (127.0.0.1:80 → web), api (… → api) to green together: 10% → 100%". */
export function shiftTogetherReason(routes: readonly [string, Route][]): string {
  const which = routes.map(([name, r]) => `${name} (${r.listen} → ${r.to})`).join(', ');
  return `shift ${which} to green together: ${describeSteps(shiftSteps(routes.map(([, r]) => r)))}`;
}

function describeSteps(steps: readonly number[]): string {
  return steps.length === 1 ? 'all at once' : steps.map((p) => `${p}%`).join(' → ');
}

export function drainReason(name: string, drainTimeoutMs: number | undefined, removed: boolean): string {
  const why = removed ? `${name} is removed from the topology; ` : '';
  if (drainTimeoutMs === undefined) return `${why}drain blue ${name}: no route sends it traffic`;
  return `${why}drain blue ${name}: wait for in-flight requests, at most ${formatDuration(drainTimeoutMs)}`;
}
