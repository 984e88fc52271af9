/**
 * Prometheus metrics (`GET /metrics`): HTTP requests as they are served, and the migrations of the
 * state directory read at scrape time (so they count migrations driven by any process, and survive
 * a restart of the server). A final migration's figures never change, so they are read once.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { MigrationSummary } from '../core/migration/summary.js';
import { isFinal, type Lifecycle } from '../core/migration/types.js';
import type { MigrationService } from '../engine/services/migration-service.js';
import type { LogStreams } from './log-streams.js';

interface LogFigures {
  /** Seconds spent in each stage entered (`bake` included). */
  stages: { stage: string; seconds: number }[];
  gateFailures: number;
  /** Read when the migration had ended: nothing more will change. */
  final: boolean;
}

const lifecycles: readonly Lifecycle[] = [
  'running',
  'paused',
  'awaiting_promotion',
  'awaiting_commit',
  'committing',
  'rolling_back',
  'completed',
  'rolled_back',
  'cancelled',
  'failed',
];

const stageBuckets: readonly number[] = [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

export interface ServerMetrics {
  registry: Registry;
  observeRequest(method: string, route: string, status: number, seconds: number): void;
}

export function createMetrics(service: MigrationService, streams: LogStreams): ServerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'cutover_server_' });
  const requests = new Counter({
    name: 'cutover_http_requests_total',
    help: 'HTTP requests served, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'cutover_http_request_duration_seconds',
    help: 'Time to serve HTTP requests, by route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers: [registry],
  });
  const cache = new Map<string, LogFigures>();
  let summaries: MigrationSummary[] = [];
  // One read of the state directory serves every metric of a scrape, whatever order they collect in.
  let reading: Promise<void> | null = null;
  let readAt = 0;
  const read = (): Promise<void> => {
    if (reading && Date.now() - readAt < 1000) return reading;
    readAt = Date.now();
    reading = (async () => {
      summaries = await service.list({});
      await refreshFigures(summaries, cache, service);
    })();
    return reading;
  };

  new Gauge({
    name: 'cutover_migrations',
    help: 'Migrations in the state directory, by lifecycle state',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      await read();
      this.reset();
      for (const state of lifecycles) this.set({ state }, 0);
      for (const m of summaries) this.inc({ state: m.lifecycle });
    },
  });
  new Histogram({
    name: 'cutover_stage_duration_seconds',
    help: 'Time migrations spent in each stage they entered (bake included)',
    labelNames: ['stage'] as const,
    buckets: [...stageBuckets],
    registers: [registry],
    async collect() {
      await read();
      this.reset();
      for (const figures of cache.values()) {
        for (const { stage, seconds } of figures.stages) this.observe({ stage }, seconds);
      }
    },
  });
  new Gauge({
    name: 'cutover_health_gate_failures',
    help: 'Health gates that failed (green never became healthy), over every recorded migration',
    registers: [registry],
    async collect() {
      await read();
      let total = 0;
      for (const figures of cache.values()) total += figures.gateFailures;
      this.set(total);
    },
  });
  new Gauge({
    name: 'cutover_log_streams',
    help: 'Live log streams (GET /v1/migrations/{id}/logs?follow=true) open now',
    registers: [registry],
    collect() {
      this.set(streams.open);
    },
  });
  new Gauge({
    name: 'cutover_log_readers',
    help: 'Migration logs being read for live streams now: one reader per migration, shared by its streams',
    registers: [registry],
    collect() {
      this.set(streams.readers);
    },
  });
  return {
    registry,
    observeRequest(method, route, status, seconds) {
      requests.inc({ method, route, status: String(status) });
      durations.observe({ method, route }, seconds);
    },
  };
}

async function refreshFigures(
  all: MigrationSummary[],
  cache: Map<string, LogFigures>,
  service: MigrationService,
): Promise<void> {
  const present = new Set(all.map((m) => m.id));
  for (const id of cache.keys()) if (!present.has(id)) cache.delete(id);
  for (const m of all) {
    const cached = cache.get(m.id);
    // A final migration's log is complete: read it once. An in-flight one is read at every scrape.
    if (cached?.final) continue;
    cache.set(m.id, await figuresOf(service, m));
  }
}

async function figuresOf(service: MigrationService, m: MigrationSummary): Promise<LogFigures> {
  const stages: LogFigures['stages'] = [];
  let gateFailures = 0;
  let open: { stage: string; at: number } | null = null;
  for await (const line of service.logs(m.id, { follow: false })) {
    if (line.kind === 'gate_failed') gateFailures++;
    const ends =
      line.kind === 'stage_entered' ||
      line.kind === 'rollback_started' ||
      line.kind === 'completed' ||
      line.kind === 'ended';
    if (ends && open) {
      stages.push({ stage: open.stage, seconds: Math.max(0, line.at - open.at) / 1000 });
      open = null;
    }
    if (line.kind === 'stage_entered' && line.stage) open = { stage: line.stage, at: line.at };
  }
  // A stage still running is counted once it has ended.
  return { stages, gateFailures, final: isFinal(m.lifecycle) };
}
