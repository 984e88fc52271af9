/**
 * Gathers what `cutover topology status` shows: the recorded layout, what the drivers observe
 * running, one quick health probe per running replica and the migration in flight; the pure core
 * (core/environment-status.ts) puts them together. Every mode's MigrationService that can observe
 * calls this with its own ways to read them.
 */
import http from 'node:http';
import { refuseUnknownEnvironment } from '../../core/down-parts.js';
import {
  type EnvironmentStatus,
  type EnvironmentSummary,
  type HealthProbe,
  type MigrationInFlight,
  migrationInFlightOf,
  statusOf,
  summaryOfStatus,
} from '../../core/environment-status.js';
import type { CurrentLayout } from '../../core/layout.js';
import type { ObservedLayout } from '../../core/observed.js';
import { own } from '../../core/records.js';
import type { Health } from '../../core/topology/types.js';
import { httpProbe, type Probe, tcpProbe } from '../health/probes.js';
import type { MigrationService } from '../services/service-types.js';

/**
 * A status probe is a look, not a gate: it waits at most this long (or the check's own timeout
 * when shorter), so that one hung replica does not hold the view.
 */
export const statusProbeTimeoutMs = 1_000;

/** What a status is read through: a MigrationService that can observe (local mode). */
export type StatusSources = Pick<
  MigrationService,
  'where' | 'currentLayout' | 'observe' | 'inFlight' | 'show'
>;

/**
 * The status of one environment. An environment never migrated, with nothing in flight, is not
 * found: ENVIRONMENT_NOT_FOUND, naming where cutover looked (the same refusal as `topology down`).
 */
export async function readEnvironmentStatus(
  sources: StatusSources,
  environment: string,
): Promise<EnvironmentStatus> {
  const [layout, inFlightId] = await Promise.all([
    sources.currentLayout(environment),
    sources.inFlight(environment),
  ]);
  // A first migration in flight has no layout yet, but it is an environment to show.
  if (inFlightId === null) refuseUnknownEnvironment(layout, sources.where);
  const observed = await sources.observe(environment);
  const migration: MigrationInFlight | null =
    inFlightId === null ? null : migrationInFlightOf((await sources.show(inFlightId)).summary);
  return statusOf({ layout, observed, health: await probeReplicas(layout, observed), migration });
}

/** A line of status for each environment named, in order. */
export async function readEnvironmentSummaries(
  sources: StatusSources,
  environments: readonly string[],
): Promise<EnvironmentSummary[]> {
  return Promise.all(
    environments.map(async (name) => summaryOfStatus(await readEnvironmentStatus(sources, name))),
  );
}

/**
 * One probe of each running replica with an address: its HTTP or TCP health check, or, without
 * one, that the driver saw it answer. A command check acts on a whole slot and may have effects,
 * so a look does not run it.
 */
async function probeReplicas(
  layout: CurrentLayout,
  observed: ObservedLayout,
): Promise<Map<string, HealthProbe>> {
  const results = new Map<string, HealthProbe>();
  const agent = new http.Agent({ keepAlive: false });
  const signal = new AbortController().signal;
  try {
    const probes: Promise<void>[] = [];
    for (const [name, component] of Object.entries(observed.components)) {
      const health = own(layout.topology?.components, name)?.health;
      for (const replica of component.replicas) {
        if (replica.address === null || replica.state !== 'running') continue;
        const address = replica.address;
        const probe = probeFor(health, address, agent);
        if (probe === null) {
          results.set(address, withoutCheck(health));
          continue;
        }
        const timeoutMs = Math.min(health?.timeout ?? statusProbeTimeoutMs, statusProbeTimeoutMs);
        probes.push(
          probe.run(timeoutMs, signal).then((result) => {
            if (result === undefined) return;
            results.set(address, {
              result: result.ok ? 'ok' : 'failing',
              summary: `${probe.action} ${result.summary}`,
            });
          }),
        );
      }
    }
    await Promise.all(probes);
  } finally {
    agent.destroy();
  }
  return results;
}

function probeFor(health: Health | undefined, address: string, agent: http.Agent): Probe | null {
  if (health?.http) {
    const spec = health.http;
    return httpProbe(
      address,
      {
        path: spec.path,
        expectStatus: spec.expectStatus,
        ...(spec.bodyMatch === undefined ? {} : { bodyMatch: new RegExp(spec.bodyMatch) }),
      },
      agent,
    );
  }
  if (health?.tcp) return tcpProbe(address);
  return null;
}

function withoutCheck(health: Health | undefined): HealthProbe {
  return health?.command
    ? { result: 'not_probed', summary: 'command check (run by migrations only)' }
    : { result: 'ok', summary: 'answering' };
}
