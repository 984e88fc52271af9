/**
 * A route's traffic per slot from Caddy's own counters: the split runs one server per slot with
 * metrics on (caddy-config.ts), and Caddy counts per server the requests by status code and their
 * durations (`caddy_http_request_duration_seconds`, read from the admin API's `/metrics`). The
 * engine's analysis takes the difference of two readings, as it does the router's counters.
 */
import {
  emptySlotTraffic,
  latencyBucketBoundsMs,
  type RouteTraffic,
  type SlotTraffic,
  type TrafficSlot,
} from '../../core/analysis/traffic.js';
import type { CaddyPaths } from './caddy-config.js';
import { adminCall } from './caddy-process.js';

const durationMetric = 'caddy_http_request_duration_seconds';

/** Reads the split's counters for the slot servers named in `servers`. */
export async function readCaddyTraffic(
  paths: CaddyPaths,
  route: string,
  servers: Record<TrafficSlot, string>,
): Promise<RouteTraffic> {
  let text: string;
  try {
    const answer = await adminCall(paths, 'split', 'GET', '/metrics');
    if (answer.status !== 200) throw new Error(`HTTP ${answer.status}`);
    text = answer.body;
  } catch (error) {
    throw new Error(
      `cannot read the traffic of route ${route}: caddy (split) for ${paths.dir} does not answer /metrics (${(error as Error).message})`,
    );
  }
  return parseCaddyTraffic(text, route, servers, Date.now());
}

/** Pure: the Prometheus text of Caddy's `/metrics` → the route's traffic per slot. */
export function parseCaddyTraffic(
  text: string,
  route: string,
  servers: Record<TrafficSlot, string>,
  at: number,
): RouteTraffic {
  const slotOf = new Map<string, TrafficSlot>([
    [servers.blue, 'blue'],
    [servers.green, 'green'],
  ]);
  const counts: Record<TrafficSlot, { slot: SlotTraffic; le: Map<number, number> }> = {
    blue: { slot: emptySlotTraffic(), le: new Map() },
    green: { slot: emptySlotTraffic(), le: new Map() },
  };
  let startedAt = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('process_start_time_seconds ')) {
      startedAt = Math.round(Number(line.split(' ')[1]) * 1000);
      continue;
    }
    if (!line.startsWith(durationMetric)) continue;
    const match = /^(\w+)\{([^}]*)\}\s+(\S+)$/.exec(line);
    if (!match) continue;
    const [, name, labelText, valueText] = match as unknown as [string, string, string, string];
    const labels = Object.fromEntries(
      [...labelText.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1] as string, m[2] as string]),
    );
    const slot = slotOf.get(labels.server ?? '');
    if (!slot) continue;
    const value = Number(valueText);
    const target = counts[slot];
    if (name === `${durationMetric}_count`) {
      target.slot.requests += value;
      if (Number(labels.code) >= 500) target.slot.errors5xx += value;
    } else if (name === `${durationMetric}_sum`) {
      target.slot.durationSumMs += value * 1000;
    } else if (name === `${durationMetric}_bucket` && labels.le !== undefined && labels.le !== '+Inf') {
      const boundMs = Number(labels.le) * 1000;
      target.le.set(boundMs, (target.le.get(boundMs) ?? 0) + value);
    }
  }
  for (const slot of ['blue', 'green'] as const) {
    const { slot: traffic, le } = counts[slot];
    traffic.buckets = rebucket(le, traffic.requests);
  }
  return { route, startedAt, at, slots: { blue: counts.blue.slot, green: counts.green.slot } };
}

/**
 * Caddy's buckets (5 ms to 10 s) onto the engine's bounds (latencyBucketBoundsMs), by linear
 * interpolation between Caddy's bounds, rounded down: a percentile read from them is never lower
 * than Caddy's own buckets allow. Past Caddy's last bound, nothing is known but the total.
 */
export function rebucket(caddy: ReadonlyMap<number, number>, requests: number): number[] {
  const bounds = [...caddy.keys()].sort((a, b) => a - b);
  const points: [number, number][] = [[0, 0], ...bounds.map((b): [number, number] => [b, caddy.get(b) ?? 0])];
  const last = points[points.length - 1] as [number, number];
  const at = (ms: number): number => {
    if (ms >= last[0]) return last[1];
    const i = points.findIndex(([bound]) => bound >= ms);
    const [hiBound, hiCount] = points[i] as [number, number];
    const [loBound, loCount] = points[i - 1] as [number, number];
    return Math.floor(loCount + ((hiCount - loCount) * (ms - loBound)) / (hiBound - loBound));
  };
  return [...latencyBucketBoundsMs.map(at), requests];
}
