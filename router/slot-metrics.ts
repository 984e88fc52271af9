import {
  emptySlotTraffic,
  latencyBucketBoundsMs,
  type RouteTraffic,
  type SlotTraffic,
} from '../core/analysis/traffic.js';
import type { Slot } from './routing-state.js';

/** One slot's counters as the hot path keeps them: a count per bucket, not yet cumulative. */
interface SlotCounters {
  requests: number;
  errors5xx: number;
  durationSumMs: number;
  /** Requests per bucket (`latencyBucketBoundsMs`, then +Inf). */
  perBucket: Float64Array;
}

type RouteCounters = Record<Slot, SlotCounters>;

/** A request of a route's main listener not yet answered: the slot it is sent to now, since when. */
export interface OpenRequest {
  slot: Slot;
  /** performance.now() when it arrived. */
  readonly arrivedMs: number;
}

/**
 * Per route and per slot: requests, 5xx responses and a latency histogram of the route's main
 * listener (not its preview listener: the gate's probes are not users' traffic), counted when each
 * response to the client is over, on the slot that answered it (after any failover). A client that
 * leaves before its answer counts as a request with the time it waited, not as a 5xx.
 *
 * Invariants:
 * - Counters only grow while the router runs (Prometheus counters): they start at zero when the
 *   router starts, and when a route enters the table. A route that leaves the table loses its
 *   counters. A slot's addresses changing (a new green, green promoted to blue at a commit) does
 *   not reset them: a window is always the difference of two snapshots, so what the slot served
 *   before the window does not count in it.
 * - A route of the table has counters for both slots from the start, so its series exist (at 0)
 *   before its first request and a rate over the first window is defined.
 */
export class SlotMetrics {
  readonly startedAt = Date.now();
  private readonly routes = new Map<string, RouteCounters>();
  /** Requests not yet answered, per route: how long they have waited is read at each snapshot. */
  private readonly open = new Map<string, Set<OpenRequest>>();

  /** A request began; its `slot` follows any failover; `close` it when its response is over. */
  opened(routeKey: string, slot: Slot, arrivedMs: number): OpenRequest {
    const request: OpenRequest = { slot, arrivedMs };
    let set = this.open.get(routeKey);
    if (!set) {
      set = new Set();
      this.open.set(routeKey, set);
    }
    set.add(request);
    return request;
  }

  closed(routeKey: string, request: OpenRequest): void {
    const set = this.open.get(routeKey);
    if (!set) return;
    set.delete(request);
    if (set.size === 0) this.open.delete(routeKey);
  }

  /** Keeps counters for exactly the routes of the table now served (after each reload). */
  keepRoutes(routeKeys: Iterable<string>): void {
    const keep = new Set(routeKeys);
    for (const key of this.routes.keys()) if (!keep.has(key)) this.routes.delete(key);
    for (const key of this.open.keys()) if (!keep.has(key)) this.open.delete(key);
    for (const key of keep) if (!this.routes.has(key)) this.routes.set(key, newRouteCounters());
  }

  /**
   * Counts one finished request. `failed`: the response was cut after it began (the upstream died
   * mid-answer): the client saw a failure whatever the status said. The hot path: no allocation.
   */
  record(routeKey: string, slot: Slot, status: number, durationMs: number, failed: boolean): void {
    let route = this.routes.get(routeKey);
    if (route === undefined) {
      route = newRouteCounters();
      this.routes.set(routeKey, route);
    }
    const counters = route[slot];
    counters.requests++;
    if (status >= 500 || failed) counters.errors5xx++;
    counters.durationSumMs += durationMs;
    const bucket = bucketIndex(durationMs);
    counters.perBucket[bucket] = (counters.perBucket[bucket] as number) + 1;
  }

  traffic(routeKey: string): RouteTraffic | null {
    const route = this.routes.get(routeKey);
    if (!route) return null;
    const blue = cumulative(route.blue);
    const green = cumulative(route.green);
    blue.inFlight = new Array<number>(latencyBucketBoundsMs.length + 1).fill(0);
    green.inFlight = new Array<number>(latencyBucketBoundsMs.length + 1).fill(0);
    const now = performance.now();
    for (const request of this.open.get(routeKey) ?? []) {
      const counts = (request.slot === 'green' ? green : blue).inFlight as number[];
      const bucket = bucketIndex(now - request.arrivedMs);
      counts[bucket] = (counts[bucket] as number) + 1;
    }
    for (const slot of [blue, green]) {
      const counts = slot.inFlight as number[];
      for (let i = 1; i < counts.length; i++) counts[i] = (counts[i] as number) + (counts[i - 1] as number);
    }
    return { route: routeKey, startedAt: this.startedAt, at: Date.now(), slots: { blue, green } };
  }

  /** Every route's traffic, by route key in order. */
  all(): RouteTraffic[] {
    return [...this.routes.keys()]
      .sort()
      .map((key) => this.traffic(key))
      .filter((t): t is RouteTraffic => t !== null);
  }
}

function newRouteCounters(): RouteCounters {
  const slot = (): SlotCounters => ({
    requests: 0,
    errors5xx: 0,
    durationSumMs: 0,
    perBucket: new Float64Array(latencyBucketBoundsMs.length + 1),
  });
  return { blue: slot(), green: slot() };
}

/** The first bucket whose bound is at least `ms` (binary search), or +Inf's. */
function bucketIndex(ms: number): number {
  let low = 0;
  let high = latencyBucketBoundsMs.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((latencyBucketBoundsMs[mid] as number) < ms) low = mid + 1;
    else high = mid;
  }
  return low;
}

function cumulative(counters: SlotCounters): SlotTraffic {
  const traffic = emptySlotTraffic();
  traffic.requests = counters.requests;
  traffic.errors5xx = counters.errors5xx;
  traffic.durationSumMs = counters.durationSumMs;
  let running = 0;
  counters.perBucket.forEach((count, i) => {
    running += count;
    traffic.buckets[i] = running;
  });
  return traffic;
}
