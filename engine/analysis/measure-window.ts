/**
 * Measuring one analysis window of a route: the router's cumulative per-slot counters read at the
 * start and at the end, and their difference. While it runs, it looks every `sampleIntervalMs` and
 * ends early on a clear breach (Flagger judges every interval): a green failing badly is rolled back
 * after one interval, not after the whole hold.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type RouteTraffic, type SlotTraffic, trafficBetween } from '../../core/analysis/traffic.js';
import { type AnalysisChecks, type AnalysisVerdict, judgeWindow } from '../../core/analysis/verdict.js';

/** How often a window is looked at before its end, to stop early on a breach. */
export const analysisSampleIntervalMs = 5_000;

/** Reads a route's cumulative traffic now (the router driver's `traffic`, bound to the route). */
export type TrafficReader = () => Promise<RouteTraffic>;

export interface WindowOptions {
  /** With checks, the window ends at the first look that breaches them. */
  checks?: AnalysisChecks;
  /** Green's share at the step, for the reasons ("at the 10 % step"). */
  weight?: number;
  sampleIntervalMs?: number;
  /** At each look before the end: the window so far, its verdict so far, and the time left. */
  onSample?: (verdict: AnalysisVerdict, leftMs: number) => void;
}

export interface WindowMeasurement {
  /** The window's traffic per slot: what the verdict judges. */
  green: SlotTraffic;
  blue: SlotTraffic;
  /** When the window started and ended (ms since the epoch, the router's clock). */
  from: number;
  to: number;
  /** The window ended before `durationMs` on a breach; this is the verdict that ended it. */
  endedEarly: AnalysisVerdict | null;
  /**
   * The router restarted during the window: its counters began again at zero, so the window holds
   * only what came after the restart.
   */
  routerRestarted: boolean;
}

/**
 * Measures `durationMs` of a route's traffic. Rejects with the signal's reason when it aborts, and
 * with the reader's error when the router cannot be read (at the start, at a look, or at the end).
 */
export async function measureWindow(
  read: TrafficReader,
  durationMs: number,
  signal: AbortSignal,
  options: WindowOptions = {},
): Promise<WindowMeasurement> {
  signal.throwIfAborted();
  const start = await read();
  const endsAt = Date.now() + durationMs;
  const interval = Math.max(1, options.sampleIntervalMs ?? analysisSampleIntervalMs);
  for (;;) {
    const left = endsAt - Date.now();
    if (left > 0) await sleep(Math.min(interval, left), undefined, { signal });
    const now = await read();
    const window = between(start, now);
    if (Date.now() >= endsAt) return { ...window, endedEarly: null };
    if (options.checks) {
      const verdict = judgeWindow(window, options.checks, weightOf(options));
      if (verdict.outcome === 'breach') return { ...window, endedEarly: verdict };
      options.onSample?.(verdict, endsAt - Date.now());
    }
  }
}

/** Judges a measured window (the early verdict when it ended early). */
export function judgeMeasurement(
  measurement: WindowMeasurement,
  checks: AnalysisChecks,
  weight?: number,
): AnalysisVerdict {
  return measurement.endedEarly ?? judgeWindow(measurement, checks, weight === undefined ? {} : { weight });
}

function between(start: RouteTraffic, end: RouteTraffic): Omit<WindowMeasurement, 'endedEarly'> {
  const routerRestarted = end.startedAt !== start.startedAt;
  // After a restart the new counters began at zero: they are the window's traffic since then.
  const from = routerRestarted ? end.startedAt : start.at;
  const base = (slot: 'blue' | 'green') =>
    routerRestarted ? end.slots[slot] : trafficBetween(start.slots[slot], end.slots[slot]);
  return { green: base('green'), blue: base('blue'), from, to: end.at, routerRestarted };
}

function weightOf(options: WindowOptions): { weight?: number } {
  return options.weight === undefined ? {} : { weight: options.weight };
}
