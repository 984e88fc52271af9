/**
 * The `analyze` command: a shift step's hold, measured and judged, route by route (side by side).
 * A route's built-in checks read the router's per-slot counters through its route driver
 * (`RouteDriver.traffic`, measureWindow); its Prometheus checks are queried at the window's end.
 *
 * Inconclusive (green had fewer than `minRequests`; or, for a route judged by Prometheus alone, a
 * query gave NaN): the hold is extended once, by its own length, and judged again (the built-in
 * checks over the whole extended window); still too little traffic then passes with a warning
 * (the step goes on, the warning is in the log and the analysis record). This is Flagger's choice
 * of not failing a step for want of traffic, bounded: a step never waits more than twice its hold.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { AnalysisSettings } from '../../core/analysis/analysis-settings.js';
import { type RouteTraffic, trafficBetween } from '../../core/analysis/traffic.js';
import { type AnalysisVerdict, judgeWindow, type VerdictOutcome } from '../../core/analysis/verdict.js';
import type { AnalysisResult, Command, RouteVerdict } from '../../core/migration/types.js';
import { formatDuration } from '../../core/topology/duration.js';
import { PermanentDriverError } from '../drivers/types.js';
import { leftText, sleepCounting, throttled } from '../runner/countdown.js';
import {
  analysisSampleIntervalMs,
  judgeMeasurement,
  measureWindow,
  type TrafficReader,
} from './measure-window.js';
import { runPrometheusCheck } from './prometheus.js';

/** Looks at a window at least this often (or 5 s): a short hold still stops early on a breach. */
const minSampleIntervalMs = 500;

export interface RouteReader {
  /** The route's driver reads its traffic (null: it cannot, e.g. nginx). */
  traffic: TrafficReader | null;
  /** What the driver is, for a message: "nginx driver edge". */
  driver: string;
}

export async function analyzeHold(
  command: Extract<Command, { kind: 'analyze' }>,
  readerOf: (route: string) => RouteReader,
  signal: AbortSignal,
  log: (line: string) => void,
): Promise<AnalysisResult> {
  // One stop for every route's window, linked to the command's: the first breach is the verdict,
  // and the first error is the command's (its retry runs alone). Invariant: analyzeHold settles only
  // once every route's window has ended, so no route keeps reading beside a rollback or a retry.
  const stop = new AbortController();
  const routeSignal = AbortSignal.any([signal, stop.signal]);
  let failure: { error: unknown } | undefined;
  const settled = await Promise.all(
    command.routes.map(async ({ route, analysis }): Promise<RouteVerdict | null> => {
      try {
        const verdict = await analyzeRoute(route, analysis, readerOf(route), command, routeSignal, log);
        if (verdict.outcome === 'breach') stop.abort(new Error(`route ${route} breached`));
        return verdict;
      } catch (error) {
        // Stopped by another route's breach or error: not judged. Otherwise this is the first error.
        if (stop.signal.aborted || signal.aborted) return null;
        failure = { error };
        stop.abort(error);
        return null;
      }
    }),
  );
  signal.throwIfAborted();
  if (failure) throw failure.error;
  // The routes judged (a route stopped by another's breach has no verdict of its own).
  const routes = settled.filter((r): r is RouteVerdict => r !== null);
  const breached = routes.filter((r) => r.outcome === 'breach');
  const inconclusive = routes.filter((r) => r.outcome === 'inconclusive');
  const named = (list: RouteVerdict[]) =>
    list.map((r) => (command.routes.length > 1 ? `route ${r.route}: ${r.reason}` : r.reason)).join('; ');
  if (breached.length > 0) return { outcome: 'breach', reason: named(breached), routes };
  if (inconclusive.length > 0) return { outcome: 'inconclusive', reason: named(inconclusive), routes };
  return { outcome: 'pass', reason: named(routes), routes };
}

function hasBuiltInChecks(analysis: AnalysisSettings): boolean {
  const { checks } = analysis;
  return (
    checks.successRate !== undefined || checks.latency !== undefined || checks.compareWithBlue !== undefined
  );
}

async function analyzeRoute(
  route: string,
  analysis: AnalysisSettings,
  reader: RouteReader,
  command: Extract<Command, { kind: 'analyze' }>,
  signal: AbortSignal,
  log: (line: string) => void,
): Promise<RouteVerdict> {
  let builtIn: AnalysisVerdict | null = null;
  if (hasBuiltInChecks(analysis)) {
    if (!reader.traffic)
      throw new PermanentDriverError(
        `route ${route}: its ${reader.driver} cannot measure traffic per slot; use prometheus checks in its analysis, or route it through the built-in router`,
      );
    builtIn = await measureBuiltIn(reader.traffic, analysis, command, signal, log, route);
  } else {
    await sleepCounting(command.ms, signal, (left) =>
      log(
        `analysis at ${command.weight} %, route ${route}: prometheus judged at the end; ${leftText(left)} left`,
      ),
    );
  }
  const reasons: string[] = builtIn ? [builtIn.reason] : [];
  let outcome = builtIn?.outcome ?? 'pass';
  // Prometheus checks are judged at the window's end (unless the built-in checks already breached).
  if (outcome !== 'breach' && analysis.prometheus.length > 0) {
    let judged = await judgePrometheus(analysis.prometheus, signal);
    // Only Prometheus judges this route: NaN (0/0, no traffic over the query's range) extends the
    // hold once, as too few requests do for the built-in checks, and the queries are judged again
    // at the extension's end; without it a green nobody sent traffic to went on unlooked at. With
    // built-in checks the router saw the traffic itself (they extended already if it was short),
    // so a NaN there is the query's own selection, which waiting does not change.
    if (!builtIn && judged.outcome === 'inconclusive') {
      log(
        `route ${route}: ${judged.reasons.join('; ')}; the hold is extended once, by ${formatDuration(command.ms)}`,
      );
      await sleep(command.ms, undefined, { signal });
      judged = await judgePrometheus(analysis.prometheus, signal);
    }
    if (judged.outcome === 'breach') reasons.splice(0, reasons.length, ...judged.reasons);
    else reasons.push(...judged.reasons);
    if (judged.outcome !== 'pass') outcome = judged.outcome;
  }
  const out: RouteVerdict = { route, outcome, reason: reasons.join('; ') };
  if (builtIn) {
    out.green = builtIn.green;
    if (builtIn.blue) out.blue = builtIn.blue;
  }
  return out;
}

/**
 * A route's Prometheus checks, in order: the first breach is the verdict (its reason alone);
 * otherwise inconclusive if any gave NaN, with every check's reason.
 */
async function judgePrometheus(
  checks: AnalysisSettings['prometheus'],
  signal: AbortSignal,
): Promise<{ outcome: VerdictOutcome; reasons: string[] }> {
  const reasons: string[] = [];
  let outcome: VerdictOutcome = 'pass';
  for (const check of checks) {
    const verdict = await runPrometheusCheck(check, { signal });
    signal.throwIfAborted();
    if (verdict.outcome === 'breach') return { outcome: 'breach', reasons: [verdict.reason] };
    if (verdict.outcome === 'inconclusive') outcome = 'inconclusive';
    reasons.push(verdict.reason);
  }
  return { outcome, reasons };
}

/** The built-in checks over the hold; inconclusive, extended once and judged over both windows. */
async function measureBuiltIn(
  read: TrafficReader,
  analysis: AnalysisSettings,
  command: Extract<Command, { kind: 'analyze' }>,
  signal: AbortSignal,
  log: (line: string) => void,
  route: string,
): Promise<AnalysisVerdict> {
  let first: RouteTraffic | undefined;
  let last: RouteTraffic | undefined;
  const recording: TrafficReader = async () => {
    const traffic = await read();
    first ??= traffic;
    last = traffic;
    return traffic;
  };
  // The analysis as it goes, at some of its looks (countdown.ts): the figures so far, the time left.
  const progress = throttled(command.ms, log);
  const options = {
    checks: analysis.checks,
    weight: command.weight,
    sampleIntervalMs: Math.max(minSampleIntervalMs, Math.min(analysisSampleIntervalMs, command.ms / 5)),
    onSample: (so: AnalysisVerdict, leftMs: number) =>
      progress(
        `analysis at ${command.weight} %, route ${route}: so far ${so.reason}; ${leftText(leftMs)} left`,
      ),
  };
  const window = await measureWindow(recording, command.ms, signal, options);
  const verdict = judgeMeasurement(window, analysis.checks, command.weight);
  if (verdict.outcome !== 'inconclusive') return verdict;
  log(`route ${route}: ${verdict.reason}; the hold is extended once, by ${formatDuration(command.ms)}`);
  const again = await measureWindow(recording, command.ms, signal, options);
  if (again.endedEarly) return again.endedEarly;
  const start = first as RouteTraffic;
  const end = last as RouteTraffic;
  // Both windows, unless the router restarted in between (its counters began again): then the second.
  const whole =
    start.startedAt === end.startedAt
      ? {
          green: trafficBetween(start.slots.green, end.slots.green),
          blue: trafficBetween(start.slots.blue, end.slots.blue),
        }
      : again;
  return judgeWindow(whole, analysis.checks, { weight: command.weight });
}
