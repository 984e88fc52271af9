import { latencyBucketBoundsMs, type RouteTraffic, type SlotTraffic } from '../core/analysis/traffic.js';
import { type ReplicationReport, replicationLines } from './replication-lag.js';
import { slots } from './routing-state.js';
import { holdDurationBoundsMs, type RouteHoldMetrics } from './write-holds.js';

/** The content type of Prometheus's text exposition format. */
export const prometheusTextType = 'text/plain; version=0.0.4; charset=utf-8';

/** The histogram's `le` labels, in seconds as Prometheus expects: "0.001" … "30", "+Inf". */
const leLabels: readonly string[] = [...latencyBucketBoundsMs.map((ms) => String(ms / 1000)), '+Inf'];
const holdLeLabels: readonly string[] = [...holdDurationBoundsMs.map((ms) => String(ms / 1000)), '+Inf'];

/**
 * The router's per-slot metrics in Prometheus's text exposition format (version 0.0.4):
 * `cutover_route_requests_total`, `cutover_route_responses_5xx_total` and the histogram
 * `cutover_route_request_duration_seconds`, each labelled with environment, route and slot; then the
 * write holds of each route (labelled with environment and route): `cutover_route_held_requests`,
 * `cutover_route_write_holds_total`, `cutover_route_held_requests_total`,
 * `cutover_route_hold_refused_total` and the histogram `cutover_route_write_hold_seconds`; then the
 * replication lag the engine reported of each switched component (router/replication-lag.ts).
 */
export function renderMetricsText(
  routes: readonly RouteTraffic[],
  startedAtMs: number,
  holds: readonly RouteHoldMetrics[] = [],
  replication: readonly ReplicationReport[] = [],
): string {
  const series = routes.flatMap((route) => {
    const [environment, name] = splitKey(route.route);
    return slots.map((slot) => ({
      labels: `environment="${escapeLabel(environment)}",route="${escapeLabel(name)}",slot="${slot}"`,
      traffic: route.slots[slot],
    }));
  });
  const lines: string[] = [];
  const counter = (name: string, help: string, value: (t: SlotTraffic) => number) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
    for (const s of series) lines.push(`${name}{${s.labels}} ${value(s.traffic)}`);
  };
  counter(
    'cutover_route_requests_total',
    'Requests the router answered, per route and the slot that answered them.',
    (t) => t.requests,
  );
  counter(
    'cutover_route_responses_5xx_total',
    "Responses with status 500 or more (the router's own 502/503/504 included) or cut mid-answer.",
    (t) => t.errors5xx,
  );
  const histogram = 'cutover_route_request_duration_seconds';
  lines.push(
    `# HELP ${histogram} Time from a request's arrival to the end of its response to the client.`,
    `# TYPE ${histogram} histogram`,
  );
  for (const s of series) {
    s.traffic.buckets.forEach((count, i) => {
      lines.push(`${histogram}_bucket{${s.labels},le="${leLabels[i]}"} ${count}`);
    });
    lines.push(`${histogram}_sum{${s.labels}} ${s.traffic.durationSumMs / 1000}`);
    lines.push(`${histogram}_count{${s.labels}} ${s.traffic.requests}`);
  }
  lines.push(...holdLines(holds));
  lines.push(...replicationLines(replication, escapeLabel));
  lines.push(
    '# HELP cutover_router_start_time_seconds When the router started counting, in seconds since the epoch.',
    '# TYPE cutover_router_start_time_seconds gauge',
    `cutover_router_start_time_seconds ${startedAtMs / 1000}`,
  );
  return `${lines.join('\n')}\n`;
}

function holdLines(holds: readonly RouteHoldMetrics[]): string[] {
  const series = holds.map((hold) => {
    const [environment, name] = splitKey(hold.route);
    return { labels: `environment="${escapeLabel(environment)}",route="${escapeLabel(name)}"`, hold };
  });
  const lines: string[] = [];
  const metric = (name: string, type: string, help: string, value: (h: RouteHoldMetrics) => number) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const s of series) lines.push(`${name}{${s.labels}} ${value(s.hold)}`);
  };
  metric(
    'cutover_route_held_requests',
    'gauge',
    "Requests a write hold keeps from the route's upstreams now.",
    (h) => h.held,
  );
  metric('cutover_route_write_holds_total', 'counter', 'Write holds started on the route.', (h) => h.holds);
  metric(
    'cutover_route_held_requests_total',
    'counter',
    'Requests held by write holds, over every hold.',
    (h) => h.heldTotal,
  );
  metric(
    'cutover_route_hold_refused_total',
    'counter',
    'Requests answered 503 with Retry-After because a write hold already held its most.',
    (h) => h.refused,
  );
  const histogram = 'cutover_route_write_hold_seconds';
  lines.push(
    `# HELP ${histogram} How long each write hold held the route's new requests, from the table that started it to its release.`,
    `# TYPE ${histogram} histogram`,
  );
  for (const s of series) {
    s.hold.durationBuckets.forEach((count, i) => {
      lines.push(`${histogram}_bucket{${s.labels},le="${holdLeLabels[i]}"} ${count}`);
    });
    lines.push(`${histogram}_sum{${s.labels}} ${s.hold.durationSumMs / 1000}`);
    lines.push(`${histogram}_count{${s.labels}} ${s.hold.ended}`);
  }
  return lines;
}

/** `<environment>/<route>` → its two parts (route names hold no slash). */
export function splitKey(key: string): [string, string] {
  const slash = key.indexOf('/');
  return slash < 0 ? ['', key] : [key.slice(0, slash), key.slice(slash + 1)];
}

export function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}
