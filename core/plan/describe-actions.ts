import { type AnalysisSettings, defaultMinRequests } from '../analysis/analysis-settings.js';
import { formatDuration } from '../topology/duration.js';
import type { Component, Route, StepHold } from '../topology/types.js';
import { type StepDwell, shiftDwells, shiftSteps } from './shift-steps.js';

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
  return `shift ${route.listen} to green ${route.to}: ${describeSteps(route.shift, shiftDwells([['', route]]))}`;
}

/** Several routes moved as one: "shift www (127.0.0.1:80 → web), api (… → api) to green together: 10% → 100%". */
export function shiftTogetherReason(routes: readonly [string, Route][]): string {
  const which = routes.map(([name, r]) => `${name} (${r.listen} → ${r.to})`).join(', ');
  const steps = shiftSteps(routes.map(([, r]) => r));
  return `shift ${which} to green together: ${describeSteps(steps, shiftDwells(routes), routes.length > 1)}`;
}

/**
 * "10% → 50% → 100%"; with holds, "10 % for 2m, then 50 % for 5m (analysis: success ≥ 99 %, p99 ≤
 * 500ms), then 100 %". Routes without holds read as they always did (plan reasons stay the same).
 */
function describeSteps(steps: readonly number[], dwells: readonly StepDwell[] = [], named = false): string {
  if (dwells.length === 0) return steps.length === 1 ? 'all at once' : steps.map((p) => `${p}%`).join(' → ');
  const byWeight = new Map(dwells.map((d) => [d.weight, d]));
  return steps
    .map((weight) => {
      const dwell = byWeight.get(weight);
      if (!dwell) return `${weight} %`;
      const hold = dwell.hold === 'manual' ? 'until promoted' : `for ${formatDuration(dwell.hold)}`;
      const analyses = dwell.analyses.map(
        (a) => `${named ? `${a.route}: ` : ''}${describeAnalysis(a.analysis)}`,
      );
      return `${weight} % ${hold}${analyses.length > 0 ? ` (analysis: ${analyses.join('; ')})` : ''}`;
    })
    .join(', then ');
}

/**
 * A route's holds in the topology's terms, as its steps are written: "20 % for 30s (analysis:
 * success ≥ 99 %, p99 ≤ 500ms), 50 % until promoted"; never the model's milliseconds and settings.
 */
export function describeHolds(holds: readonly StepHold[]): string {
  if (holds.length === 0) return 'none';
  return holds
    .map((h) => {
      const hold = h.hold === 'manual' ? 'until promoted' : `for ${formatDuration(h.hold)}`;
      return `${h.weight} % ${hold}${h.analysis ? ` (analysis: ${describeAnalysis(h.analysis)})` : ''}`;
    })
    .join(', ');
}

/** "success ≥ 99 %, p99 ≤ 500ms, p99 ≤ 2× blue's, prometheus `…` ≤ 0.01". */
export function describeAnalysis(settings: AnalysisSettings): string {
  const { checks } = settings;
  const parts: string[] = [];
  if (checks.successRate) parts.push(`success ≥ ${checks.successRate.min} %`);
  if (checks.latency?.p99) parts.push(`p99 ≤ ${formatDuration(checks.latency.p99.maxMs)}`);
  const blue = checks.compareWithBlue;
  if (blue?.p99) parts.push(`p99 ≤ ${blue.p99.maxRatio}× blue's`);
  if (blue?.successRate) parts.push(`success ≥ blue's − ${blue.successRate.maxDrop} points`);
  for (const check of settings.prometheus) {
    const bounds = [
      check.min === undefined ? '' : `≥ ${check.min}`,
      check.max === undefined ? '' : `≤ ${check.max}`,
    ].filter(Boolean);
    parts.push(`prometheus \`${check.query}\` ${bounds.join(' and ')}`);
  }
  return `${parts.join(', ')}${checks.minRequests !== defaultMinRequests ? ` over ≥ ${checks.minRequests} requests` : ''}`;
}

export function drainReason(name: string, drainTimeoutMs: number | undefined, removed: boolean): string {
  const why = removed ? `${name} is removed from the topology; ` : '';
  if (drainTimeoutMs === undefined) return `${why}drain blue ${name}: no route sends it traffic`;
  return `${why}drain blue ${name}: wait for in-flight requests, at most ${formatDuration(drainTimeoutMs)}`;
}
