/**
 * The verdict on one analysis window: pure, from the window's traffic per slot (the difference of
 * two cumulative router snapshots, traffic.ts) and the route's analysis checks.
 *
 * Invariants:
 * - Requests still in flight to green past the latency bound (`latency.p99.max`, else
 *   `stalledAfterMs`) count as green's requests, as slow as they have waited so far: a green that
 *   hangs shows its traffic. Green that answered none of its requests while some wait past the bound
 *   is a `breach`, whatever else is set.
 * - Fewer green requests than `minRequests` (and never fewer than one) is `inconclusive`, unless
 *   what was seen already proves a breach whatever the requests still to come do: every request
 *   failed (or was slow), or the 5xx (the slow requests) alone are more than `successRate.min`
 *   (`latency.p99.max`) allows of `minRequests`. No check passes on too little traffic.
 * - Otherwise the verdict is `breach` iff at least one check is breached, and the reason names each
 *   breach with its figures; else `pass`, with the figures that passed.
 * - The comparison with blue is made only when blue had `minRequests` in the same window too; else
 *   it is skipped and the reason says so (at 100 % green, blue has no traffic to compare with).
 */
import {
  boundIndexAtLeast,
  latencyBucketBoundsMs,
  quantileMs,
  type SlotTraffic,
  withStalled,
} from './traffic.js';

export interface AnalysisChecks {
  /** Fewest green requests in a window for any check to be judged. */
  minRequests: number;
  /** Lowest share of green responses that are not 5xx, in percent (99 → at most 1 % 5xx). */
  successRate?: { min: number };
  /** Highest green p99 latency, in milliseconds. */
  latency?: { p99?: { maxMs: number } };
  compareWithBlue?: {
    /** Highest green p99 as a multiple of blue's over the same window (2 → at most twice blue's). */
    p99?: { maxRatio: number };
    /** Most percentage points green's success rate may fall below blue's. */
    successRate?: { maxDrop: number };
  };
}

export type VerdictOutcome = 'pass' | 'breach' | 'inconclusive';

export interface SlotFigures {
  requests: number;
  errors5xx: number;
  /** Percent of requests that were not 5xx; null without requests. */
  successRate: number | null;
  p99Ms: number | null;
}

export interface AnalysisVerdict {
  outcome: VerdictOutcome;
  /** One line a person reads, with the figures: "green 5xx 4.2 % > 1 % over 512 requests at the 10 % step". */
  reason: string;
  green: SlotFigures;
  blue?: SlotFigures;
}

export interface WindowTraffic {
  green: SlotTraffic;
  blue?: SlotTraffic;
}

/**
 * Blue's p99 is taken as at least the histogram's finest bound when compared with: below it the
 * histogram cannot tell durations apart, and a ratio to a fraction of a millisecond means nothing.
 */
const comparisonFloorMs = latencyBucketBoundsMs[0] ?? 1;

/** Without a latency bound, a request in flight to green this long counts as stalled. */
export const stalledAfterMs = 1_000;

/** `weight`: green's share at the step being judged, named in the reason ("at the 10 % step"). */
export function judgeWindow(
  window: WindowTraffic,
  checks: AnalysisChecks,
  context: { weight?: number } = {},
): AnalysisVerdict {
  const boundMs = checks.latency?.p99?.maxMs ?? stalledAfterMs;
  const seen = withStalled(window.green, boundMs);
  const green = figuresOf(seen.traffic);
  const blue = window.blue ? figuresOf(window.blue) : undefined;
  const where = `over ${green.requests} request${green.requests === 1 ? '' : 's'}${
    context.weight !== undefined ? ` at the ${context.weight} % step` : ''
  }`;
  const base = { green, ...(blue ? { blue } : {}) };
  const needed = Math.max(1, checks.minRequests);
  const stalled =
    seen.stalled > 0 ? ` (${seen.stalled} of them still in flight past ${formatMs(boundMs)})` : '';
  if (seen.stalled > 0 && window.green.requests === 0)
    return {
      ...base,
      outcome: 'breach',
      reason: `green answered none of its requests: ${seen.stalled} in flight past ${formatMs(boundMs)}${context.weight !== undefined ? ` at the ${context.weight} % step` : ''}`,
    };
  if (green.requests < needed) {
    const proven = provenBreaches(seen.traffic, checks, needed);
    if (proven.length > 0)
      return {
        ...base,
        outcome: 'breach',
        reason: `${proven.join('; ')} ${where}${stalled}, fewer than the ${needed} needed but enough to prove it`,
      };
    return {
      ...base,
      outcome: 'inconclusive',
      reason: `green had ${green.requests} request${green.requests === 1 ? '' : 's'}, fewer than the ${needed} needed to judge it${context.weight !== undefined ? ` at the ${context.weight} % step` : ''}`,
    };
  }
  const breaches: string[] = [];
  const passes: string[] = [];
  const note = (breached: boolean, line: string) => (breached ? breaches : passes).push(line);

  if (checks.successRate && green.successRate !== null) {
    const maxErrors = 100 - checks.successRate.min;
    const errors = 100 - green.successRate;
    const [shown, limit] = percentPair(errors, maxErrors);
    const breached = green.successRate < checks.successRate.min;
    note(breached, `green 5xx ${shown} % ${breached ? '>' : '≤'} ${limit} %`);
  }
  const p99 = checks.latency?.p99;
  if (p99 && green.p99Ms !== null) {
    const breached = green.p99Ms > p99.maxMs;
    note(breached, `green p99 ${formatMs(green.p99Ms)} ${breached ? '>' : '≤'} ${formatMs(p99.maxMs)}`);
  }
  const compare = checks.compareWithBlue;
  if (compare && (compare.p99 || compare.successRate)) {
    if (!blue || blue.requests < needed)
      passes.push(`no comparison with blue: it had ${blue?.requests ?? 0} requests, fewer than ${needed}`);
    else compareWithBlue(green, blue, compare, note);
  }
  if (breaches.length > 0)
    return { ...base, outcome: 'breach', reason: `${breaches.join('; ')} ${where}${stalled}` };
  return { ...base, outcome: 'pass', reason: `${passes.join('; ') || 'no check set'} ${where}${stalled}` };
}

/**
 * With fewer requests than `needed`: the checks whose breach is certain whatever the requests still
 * to come do (all of them fine): every request failed (was slow), or more failed (were slow) than
 * the check allows of `needed` requests.
 */
function provenBreaches(traffic: SlotTraffic, checks: AnalysisChecks, needed: number): string[] {
  const proven: string[] = [];
  const { requests } = traffic;
  if (requests === 0) return proven;
  const prove = (bad: number, allowedShare: number, what: string, bound: string) => {
    const allowed = Math.floor(needed * allowedShare + 1e-9);
    if (bad === requests)
      proven.push(`${what} on every one of its ${requests} request${requests === 1 ? '' : 's'}`);
    else if (bad > allowed)
      proven.push(
        `${what} on ${bad} request${bad === 1 ? '' : 's'}, more than the ${allowed} that ${bound} allows of ${needed}`,
      );
  };
  if (checks.successRate) {
    prove(
      traffic.errors5xx,
      (100 - checks.successRate.min) / 100,
      'green 5xx',
      `successRate.min ${checks.successRate.min} %`,
    );
  }
  const p99 = checks.latency?.p99;
  if (p99) {
    // Only what certainly took longer than the bound: above the first bucket bound at or past it.
    const j = boundIndexAtLeast(p99.maxMs);
    const slow = requests - (j < traffic.buckets.length - 1 ? (traffic.buckets[j] ?? 0) : requests);
    if (slow > 0)
      prove(slow, 0.01, `green slower than ${formatMs(p99.maxMs)}`, `latency.p99.max ${formatMs(p99.maxMs)}`);
  }
  return proven;
}

function compareWithBlue(
  green: SlotFigures,
  blue: SlotFigures,
  compare: NonNullable<AnalysisChecks['compareWithBlue']>,
  note: (breached: boolean, line: string) => void,
): void {
  if (compare.p99 && green.p99Ms !== null && blue.p99Ms !== null) {
    const ratio = green.p99Ms / Math.max(blue.p99Ms, comparisonFloorMs);
    const breached = ratio > compare.p99.maxRatio;
    note(
      breached,
      `green p99 ${formatMs(green.p99Ms)} is ${formatRatio(ratio)}× blue's ${formatMs(blue.p99Ms)} (${breached ? 'more than' : 'at most'} ${compare.p99.maxRatio}×)`,
    );
  }
  if (compare.successRate && green.successRate !== null && blue.successRate !== null) {
    const drop = blue.successRate - green.successRate;
    const breached = drop > compare.successRate.maxDrop;
    const [g, b] = percentPair(100 - green.successRate, 100 - blue.successRate);
    note(
      breached,
      `green 5xx ${g} % against blue's ${b} % (${breached ? 'more than' : 'at most'} ${compare.successRate.maxDrop} points worse)`,
    );
  }
}

export function figuresOf(traffic: SlotTraffic): SlotFigures {
  const { requests, errors5xx } = traffic;
  return {
    requests,
    errors5xx,
    successRate: requests > 0 ? (100 * (requests - errors5xx)) / requests : null,
    p99Ms: quantileMs(traffic, 0.99),
  };
}

/** Two percentages with as many decimals (1 to 3) as it takes for different values to read differently. */
function percentPair(value: number, other: number): [string, string] {
  for (const digits of [1, 2, 3]) {
    const a = trimmed(value, digits);
    const b = trimmed(other, digits);
    if (a !== b || value === other || digits === 3) return [a, b];
  }
  return [trimmed(value, 3), trimmed(other, 3)];
}

function trimmed(value: number, digits: number): string {
  return String(Number(value.toFixed(digits)));
}

/** 0.4 → "0.4 ms", 120 → "120 ms", 2100 → "2.1 s". */
export function formatMs(ms: number): string {
  if (ms < 10) return `${trimmed(ms, 1)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${trimmed(ms / 1000, ms < 10_000 ? 2 : 1)} s`;
}

function formatRatio(ratio: number): string {
  return ratio >= 10 ? String(Math.round(ratio)) : trimmed(ratio, 1);
}
