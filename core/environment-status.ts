/**
 * What `cutover topology status` and `GET /v1/environments/{name}` show: the record of an
 * environment beside what its drivers observe running, the migration in flight and the drift
 * between the two. Pure: built from data the engine gathered (the layout, the observation, health
 * probes, the migration), so the CLI, the API and the self-heal loop read one shape. Times are
 * ISO 8601.
 */
import type { CurrentLayout, Slot } from './layout.js';
import { figureJson, type ReplicationFigureJson } from './migration/replication-lag.js';
import type { MigrationSummary, RunnerState } from './migration/summary.js';
import type { ObservedLayout, ReplicaState, RouteServingState } from './observed.js';
import { findDrift } from './plan/drift.js';
import type { Drift } from './plan/types.js';
import { own } from './records.js';
import { componentHost, routeHost } from './topology/hosts.js';

export interface EnvironmentStatus {
  environment: string;
  /** Increases at every commit; 0 before the first. */
  serial: number;
  committedAt: string | null;
  /** When the drivers were asked (ISO 8601). */
  observedAt: string;
  components: ComponentStatus[];
  routes: RouteStatus[];
  migration: MigrationInFlight | null;
  /**
   * Every difference between the record and what runs, found as plans find it (`findDrift`), so
   * what status shows is what `migrate` and self-heal repair; empty when they agree.
   */
  drift: DriftItem[];
}

export interface ComponentStatus {
  name: string;
  version: string;
  slot: Slot;
  /** The host its calls run on and its replicas were seen from (issue 30); absent when not placed. */
  host?: string;
  replicas: ReplicaStatus[];
}

export interface ReplicaStatus {
  address: string | null;
  pid: number | null;
  state: ReplicaState;
  detail: string | null;
  /** The last health probe of this replica (or whether it answers, without a health check). */
  health: HealthProbe;
}

/**
 * `ok`: the probe passed; `failing`: it did not; `not_probed`: the replica is not running, or its
 * check is a command (it acts on the whole slot and may have effects: not run for a look).
 */
export interface HealthProbe {
  result: 'ok' | 'failing' | 'not_probed';
  /** What was seen: `200`, `connection refused`, `answering`. */
  summary: string;
}

export interface RouteStatus {
  name: string;
  /** The host whose router serves it and answered for it (issue 30); absent when not placed. */
  host?: string;
  listen: string;
  /** The component it sends traffic to. */
  to: string;
  state: RouteServingState;
  /** Percent of traffic on each slot, as served (as recorded when the traffic layer cannot tell). */
  weights: { blue: number; green: number };
  /** Requests in flight now; null when the traffic layer does not count them. */
  inFlight: number | null;
  detail: string | null;
}

export interface MigrationInFlight {
  id: string;
  /**
   * As `migration list` shows it: `running (health_gate)`, `awaiting commit`; with a dead runner,
   * followed by `— runner died (pid N); resume: <command>`.
   */
  status: string;
  /** Whether a process drives it, as the migration's summary says (`dead`: resume it). */
  runner: RunnerState;
  /** With runner `dead`: the command that resumes it. */
  resumeWith?: string;
  /** The last analysis of a shift hold, when one ran: its verdict and figures. */
  analysis?: MigrationSummary['analysis'];
  /** The replication lag of its switched components, as the health gate last measured it. */
  replication?: ReplicationFigureJson[];
}

/** The migration in flight, from its summary: what status shows of it. */
export function migrationInFlightOf(summary: MigrationSummary): MigrationInFlight {
  const { id, status, runner, resumeWith, analysis, replication } = summary;
  return {
    id,
    status,
    runner,
    ...(resumeWith === undefined ? {} : { resumeWith }),
    ...(analysis === undefined ? {} : { analysis }),
    ...(replication === undefined || replication.length === 0
      ? {}
      : { replication: replication.map(figureJson) }),
  };
}

/** One difference between the record and the world, as plans name it (core/plan/drift.ts). */
export type DriftItem = Drift;

/** One line of `GET /v1/environments`. */
export interface EnvironmentSummary {
  environment: string;
  serial: number;
  committedAt: string | null;
  components: number;
  routes: number;
  migration: MigrationInFlight | null;
  drift: number;
}

/** What the engine gathered, for `statusOf`. */
export interface StatusInputs {
  layout: CurrentLayout;
  observed: ObservedLayout;
  /** The health probe of each replica, by address (a replica without an address is not probed). */
  health: ReadonlyMap<string, HealthProbe>;
  migration: MigrationInFlight | null;
}

const notProbed: HealthProbe = { result: 'not_probed', summary: 'not probed' };

export function statusOf(inputs: StatusInputs): EnvironmentStatus {
  const { layout, observed } = inputs;
  const topology = layout.topology;
  const components: ComponentStatus[] = Object.keys(topology?.components ?? {})
    .sort()
    .map((name) => {
      const seen = own(observed.components, name);
      const slot = own(layout.slots ?? {}, name);
      const host = topology ? componentHost(topology, name) : undefined;
      return {
        name,
        version: seen?.version ?? slot?.version ?? topology?.components[name]?.version ?? '',
        slot: seen?.slot ?? slot?.slot ?? 'blue',
        ...(host === undefined ? {} : { host }),
        replicas: (seen?.replicas ?? []).map((r) => ({
          address: r.address,
          pid: r.pid ?? null,
          state: r.state,
          detail: r.detail ?? null,
          health: (r.address === null ? undefined : inputs.health.get(r.address)) ?? notProbed,
        })),
      };
    });
  const routes: RouteStatus[] = Object.entries(topology?.routes ?? {})
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, spec]) => {
      const seen = own(observed.routes, name);
      const green = seen?.greenPercent ?? 0;
      const host = topology ? routeHost(topology, name) : undefined;
      return {
        name,
        ...(host === undefined ? {} : { host }),
        listen: seen?.listen ?? spec.listen,
        to: spec.to,
        state: seen?.state ?? 'unknown',
        weights: { blue: 100 - green, green },
        inFlight: seen?.inFlight ?? null,
        detail: seen?.detail ?? null,
      };
    });
  return {
    environment: layout.environment,
    serial: layout.serial,
    committedAt: layout.committedAt ?? null,
    observedAt: observed.observedAt,
    components,
    routes,
    migration: inputs.migration,
    drift: findDrift(observed),
  };
}

export function summaryOfStatus(status: EnvironmentStatus): EnvironmentSummary {
  return {
    environment: status.environment,
    serial: status.serial,
    committedAt: status.committedAt,
    components: status.components.length,
    routes: status.routes.length,
    migration: status.migration,
    drift: status.drift.length,
  };
}
