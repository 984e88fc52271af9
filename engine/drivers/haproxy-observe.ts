/**
 * Reading a route back from haproxy: what it serves (observe: drift) and what it counted (traffic:
 * analysis), from the runtime API's `show servers state` and `show stat`.
 */
import {
  emptySlotTraffic,
  latencyBucketBoundsMs,
  type RouteTraffic,
  type SlotTraffic,
  type TrafficSlot,
} from '../../core/analysis/traffic.js';
import type { ObservedRoute } from '../../core/observed.js';
import type { Route } from '../../core/topology/types.js';
import { readIfExists } from './driver-files.js';
import { desiredBackends, type HaproxyRoute, renderHaproxyConfig } from './haproxy-config.js';
import { haproxyFiles } from './haproxy-process.js';
import { adminDrain, adminMaintenance } from './haproxy-reconcile.js';
import { readRecord } from './haproxy-record.js';
import {
  HaproxyUnreachableError,
  type Row,
  type ServerState,
  showInfo,
  showServersState,
  showStat,
} from './haproxy-runtime.js';
import { routeKey, servedAsRecorded } from './managed-balancer.js';
import { PermanentDriverError, type RouteCallContext } from './types.js';

/**
 * A route as haproxy serves it now: `not_served` when the record has no such route or haproxy does
 * not answer on its socket; `edited` when the file is not the one cutover wrote, or a server of the
 * route's backends is not as cutover set it (disabled, drained or re-weighted by hand, removed or
 * added); else `served`, with the split recorded and blue's and green's current sessions.
 */
export async function observeHaproxyRoute(
  ctx: RouteCallContext,
  route: string,
  spec: Route,
): Promise<ObservedRoute> {
  const seen = { route, listen: spec.listen };
  const files = haproxyFiles(ctx.stateDir);
  const record = await readRecord(files.record);
  const entry = record.routes[routeKey(ctx.environment, route)];
  if (!entry) return { ...seen, state: 'not_served', detail: `${files.record} has no such route` };
  const text = await readIfExists(files.config);
  if (text !== renderHaproxyConfig(record, files)) {
    const how = text === null ? 'is missing' : 'is not the one cutover wrote';
    return { ...seen, state: 'edited', edit: 'haproxy.cfg edited', detail: `${files.config} ${how}` };
  }
  let live: ServerState[];
  let stats: Row[];
  try {
    live = await showServersState(files.socket);
    stats = await showStat(files.socket);
  } catch (error) {
    if (!(error instanceof HaproxyUnreachableError)) throw error;
    return {
      ...seen,
      state: 'not_served',
      detail: `haproxy for ${files.dir} does not answer (${error.message})`,
    };
  }
  const edit = serverEdit(entry, live);
  if (edit) return { ...seen, state: 'edited', edit, detail: `${edit} (${files.socket})` };
  const main = desiredBackends(entry)[0]?.backend;
  const inFlight = stats
    .filter((row) => row.pxname === main && row.svname !== 'BACKEND')
    .reduce((sum, row) => sum + (Number(row.scur) || 0), 0);
  return servedAsRecorded(seen, entry, { inFlight });
}

/** The first server of the route's backends that is not as cutover set it, in words; or null. */
function serverEdit(entry: HaproxyRoute, live: readonly ServerState[]): string | null {
  for (const backend of desiredBackends(entry)) {
    const servers = live.filter((s) => s.backend === backend.backend);
    const where = backend.kind === 'preview' ? ' (preview)' : '';
    for (const want of backend.servers) {
      const got = servers.find((s) => s.name === want.name);
      const named = `haproxy server ${want.address}${where}`;
      if (!got) return `${named} removed by hand`;
      if ((got.admin & adminMaintenance) !== 0) return `${named} disabled by hand`;
      if (want.weight > 0 && (got.admin & adminDrain) !== 0) return `${named} drained by hand`;
      if (got.weight !== want.weight) return `${named} weight ${got.weight}, cutover set ${want.weight}`;
    }
    const wanted = new Set(backend.servers.map((s) => s.name));
    // A server left in maintenance by cutover (its deletion waits for its connections) is no edit.
    const added = servers.find((s) => !wanted.has(s.name) && (s.admin & adminMaintenance) === 0);
    if (added) return `haproxy server ${added.address}${where} added by hand`;
  }
  return null;
}

interface Accumulated {
  worker: string;
  startedAt: number;
  /** Each server's last count (by backend/name): a server deleted and added again counts from 0. */
  last: Map<string, number>;
  slots: Record<TrafficSlot, SlotTraffic>;
}

/**
 * The route's traffic per slot, from haproxy's per-server counters: requests are the responses
 * counted (hrsp_1xx … hrsp_other) plus responses that failed (eresp), 5xx are hrsp_5xx plus eresp.
 * haproxy keeps no latency histogram, only each server's average response time over its last 1024
 * requests (rtime): the requests counted since the previous look are put in that average's bucket.
 * So p99 checks judge haproxy's averages between looks (every 0.5–5 s in an analysis), not single
 * requests. Counters begin again when haproxy's worker changes (a reload, a restart): `startedAt`
 * moves then, as the built-in router's does.
 */
export function trafficReader(): (ctx: RouteCallContext, route: string) => Promise<RouteTraffic> {
  const sums = new Map<string, Accumulated>();
  return async (ctx, route) => {
    const files = haproxyFiles(ctx.stateDir);
    const key = routeKey(ctx.environment, route);
    const entry = (await readRecord(files.record)).routes[key];
    if (!entry) throw new PermanentDriverError(`route ${route}: ${files.record} has no such route`);
    const worker = (await showInfo(files.socket)).Pid as string;
    const rows = await showStat(files.socket);
    const id = `${files.dir}|${key}`;
    let sum = sums.get(id);
    if (!sum || sum.worker !== worker) {
      sum = {
        worker,
        startedAt: Date.now(),
        last: new Map(),
        slots: { blue: emptySlotTraffic(), green: emptySlotTraffic() },
      };
      sums.set(id, sum);
    }
    const main = desiredBackends(entry)[0]?.backend;
    for (const row of rows) {
      if (row.pxname !== main || row.svname === 'BACKEND') continue;
      const slot = entry.blue.includes(row.addr ?? '')
        ? 'blue'
        : entry.green.includes(row.addr ?? '')
          ? 'green'
          : null;
      if (!slot) continue;
      addServer(sum, `${row.pxname}/${row.svname}`, row, sum.slots[slot]);
    }
    return { route: key, startedAt: sum.startedAt, at: Date.now(), slots: structuredClone(sum.slots) };
  };
}

const responseFields: readonly string[] = [
  'hrsp_1xx',
  'hrsp_2xx',
  'hrsp_3xx',
  'hrsp_4xx',
  'hrsp_5xx',
  'hrsp_other',
  'eresp',
];

function addServer(sum: Accumulated, server: string, row: Row, slot: SlotTraffic): void {
  const count = (field: string) => Number(row[field]) || 0;
  const total = responseFields.reduce((acc, field) => acc + count(field), 0);
  const errors = count('hrsp_5xx') + count('eresp');
  const before = sum.last.get(server);
  const beforeErrors = sum.last.get(`${server}#5xx`);
  sum.last.set(server, total);
  sum.last.set(`${server}#5xx`, errors);
  // The first look at a server counts what it did before too (the window is a difference anyway).
  const added = before === undefined || total < before ? total : total - before;
  const addedErrors = beforeErrors === undefined || errors < beforeErrors ? errors : errors - beforeErrors;
  if (added <= 0 && addedErrors <= 0) return;
  const rtimeMs = count('rtime');
  slot.requests += added;
  slot.errors5xx += Math.min(added, addedErrors);
  slot.durationSumMs += added * rtimeMs;
  const first = latencyBucketBoundsMs.findIndex((bound) => bound >= rtimeMs);
  const from = first < 0 ? latencyBucketBoundsMs.length : first;
  for (let i = from; i < slot.buckets.length; i++) slot.buckets[i] = (slot.buckets[i] ?? 0) + added;
}
