/**
 * What the router measures of one slot's traffic, and the arithmetic on it. Pure.
 *
 * Counters are cumulative (since the router started), as Prometheus counters are: a window's
 * traffic is the difference of two snapshots (`trafficBetween`), never a counter that is reset.
 */
export type TrafficSlot = 'blue' | 'green';

/**
 * Upper bounds of the latency histogram's buckets, in milliseconds (a last bucket, +Inf, follows).
 * From 1 ms to 30 s, each at most ~1.7× the one before, so a p99 read from them by linear
 * interpolation is off by less than one bucket's width; 500 ms, the usual p99 bound, is a bound.
 */
export const latencyBucketBoundsMs: readonly number[] = [
  1, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500,
  10_000, 15_000, 20_000, 30_000,
];

export interface SlotTraffic {
  requests: number;
  /** Responses with a status of 500 or more, the router's own 502/503/504 included, and cut responses. */
  errors5xx: number;
  /** Sum of every request's duration, in milliseconds. */
  durationSumMs: number;
  /**
   * Cumulative histogram: `buckets[i]` counts requests that took at most `latencyBucketBoundsMs[i]`;
   * the last entry (one more than there are bounds) is +Inf, which equals `requests`.
   */
  buckets: number[];
  /**
   * The requests in flight when the snapshot was taken (a gauge, not a counter), as a cumulative
   * histogram of how long each has waited so far, with the bounds of `buckets`: `inFlight[i]` have
   * waited at most `latencyBucketBoundsMs[i]`, the last entry is every request in flight. A green
   * that hangs answers nothing, so its finished requests alone show no traffic: these show it.
   * Absent from a router from before it.
   */
  inFlight?: number[];
}

/** A route's traffic per slot as the router counted it at `at` (ms since the epoch). */
export interface RouteTraffic {
  /** `<environment>/<route>`. */
  route: string;
  /** When the router started counting: a different value in two snapshots means it restarted between them. */
  startedAt: number;
  at: number;
  slots: Record<TrafficSlot, SlotTraffic>;
}

export function emptySlotTraffic(): SlotTraffic {
  return {
    requests: 0,
    errors5xx: 0,
    durationSumMs: 0,
    buckets: new Array<number>(latencyBucketBoundsMs.length + 1).fill(0),
  };
}

/** The traffic between two cumulative snapshots of the same counters (`end` taken after `start`). */
export function trafficBetween(start: SlotTraffic, end: SlotTraffic): SlotTraffic {
  return {
    requests: end.requests - start.requests,
    errors5xx: end.errors5xx - start.errors5xx,
    durationSumMs: end.durationSumMs - start.durationSumMs,
    buckets: end.buckets.map((count, i) => count - (start.buckets[i] ?? 0)),
    // A gauge: what is in flight at the window's end.
    ...(end.inFlight ? { inFlight: end.inFlight } : {}),
  };
}

/**
 * The index of the first bucket bound at or above `ms`: a request that has waited longer than that
 * bound has certainly waited longer than `ms`. The +Inf bucket's index past the last bound.
 */
export function boundIndexAtLeast(ms: number): number {
  const i = latencyBucketBoundsMs.findIndex((bound) => bound >= ms);
  return i < 0 ? latencyBucketBoundsMs.length : i;
}

/**
 * The traffic with the requests in flight past `ms` counted as requests that took as long as they
 * have waited so far (each at its age's bucket, a lower estimate of its duration, not a 5xx);
 * `stalled`, how many. Requests in flight for less than `ms` are left out: they may yet be quick.
 */
export function withStalled(traffic: SlotTraffic, ms: number): { traffic: SlotTraffic; stalled: number } {
  const inFlight = traffic.inFlight;
  if (!inFlight) return { traffic, stalled: 0 };
  const j = boundIndexAtLeast(ms);
  const below = j < inFlight.length ? (inFlight[j] ?? 0) : (inFlight[inFlight.length - 1] ?? 0);
  const stalled = (inFlight[inFlight.length - 1] ?? 0) - below;
  if (stalled <= 0) return { traffic, stalled: 0 };
  const buckets = traffic.buckets.map((count, k) => (k > j ? count + (inFlight[k] ?? 0) - below : count));
  return { traffic: { ...traffic, requests: traffic.requests + stalled, buckets }, stalled };
}

/**
 * The q-quantile (0..1) of the durations, in ms, as Prometheus's histogram_quantile estimates it:
 * the bucket holding the rank, linear interpolation inside it (from 0 in the first bucket), and the
 * highest finite bound when the rank falls in +Inf. null without requests.
 */
export function quantileMs(traffic: SlotTraffic, q: number): number | null {
  const { buckets } = traffic;
  const total = buckets[buckets.length - 1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let b = 0;
  while (b < buckets.length - 1 && (buckets[b] ?? 0) < rank) b++;
  if (b === buckets.length - 1) return latencyBucketBoundsMs[latencyBucketBoundsMs.length - 1] ?? null;
  const lower = b === 0 ? 0 : (latencyBucketBoundsMs[b - 1] ?? 0);
  const upper = latencyBucketBoundsMs[b] ?? lower;
  const below = b === 0 ? 0 : (buckets[b - 1] ?? 0);
  const inBucket = (buckets[b] ?? 0) - below;
  if (inBucket <= 0) return upper;
  return lower + (upper - lower) * ((rank - below) / inBucket);
}
