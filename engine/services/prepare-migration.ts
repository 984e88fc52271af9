/**
 * Preparing a migration under the claim: parse the topology, take the environment, read its
 * layout, observe what runs of it, digest its secrets and images, plan, check a pinned plan, and
 * decide whether there is anything to do. `cutover topology plan`, the local start and the
 * Temporal start all go through here, so a plan and the migration started from it are computed
 * the same way and "nothing to change" means the same thing in every mode (`isEmptyPlan`).
 * Where the layout is kept and who observes it differ by mode: the caller says (`MigrationHome`).
 */
import { CutoverError, TopologyInvalidError } from '../../core/errors.js';
import type { CurrentLayout } from '../../core/layout.js';
import { migrationParallelism } from '../../core/migration/step.js';
import type { CommitOrigin, MigrationSpec, RolledBackTo } from '../../core/migration/types.js';
import type { ObservedLayout } from '../../core/observed.js';
import { buildPlan } from '../../core/plan/build-plan.js';
import type { PlanInputs } from '../../core/plan/drift.js';
import type { ImageDigests } from '../../core/plan/image-changes.js';
import { isEmptyPlan, type Plan } from '../../core/plan/types.js';
import { formatDiagnostic } from '../../core/topology/diagnostic.js';
import { namedHosts, routeHost, runsOnProblems } from '../../core/topology/hosts.js';
import { loadTopology } from '../../core/topology/load-topology.js';
import { locateProblems } from '../../core/topology/locate.js';
import type { Topology } from '../../core/topology/types.js';
import { imageDigestsFor } from '../drivers/container-images.js';
import { switchableComponents } from '../drivers/switched.js';
import { planSecrets } from '../secrets/resolve-secrets.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import { routeCertificateProblems } from '../sources/check-route-certificates.js';
import type { StateDir } from '../store/state-dir.js';
import { auditOf, checkReplace, pinError, refuseMovedLayout } from './migration-common.js';
import type { TopologySource } from './service-types.js';

/** The environment held for the migration being prepared, until it is created or given up. */
export interface HeldEnvironment {
  release(): void;
  /** Something repaired on the way (a damaged claim), for the operator. */
  notice?: string;
}

/** What a plan digests secrets with: the process's secrets, hashed with a state directory's key. */
export interface PlanSecrets {
  key: StateDir;
  read: ProcessSecrets;
}

/** Where a mode keeps an environment's layouts and how it sees what runs. */
export interface MigrationHome {
  /** The environment's current layout. */
  layout(environment: string): Promise<CurrentLayout>;
  /** An earlier layout while it is kept, else null: tells a stale pinned plan from another one. */
  layoutAt(environment: string, serial: number): Promise<CurrentLayout | null>;
  /** What runs of `layout`, observed where the drivers' state is; relative paths against `baseDir`. */
  observe(layout: CurrentLayout, baseDir: string): Promise<ObservedLayout>;
  /**
   * The secrets this process reads and the state directory whose key hashes their values (for the
   * plan to see a changed secret); absent: a changed secret is not seen.
   */
  secrets?: PlanSecrets;
  /**
   * Takes the environment before its layout is read (local: the claim file); absent where
   * something else excludes a second migration (Temporal: the workflow id), or for a plan alone.
   */
  hold?(environment: string): HeldEnvironment;
  /**
   * Why this mode cannot run calls on `host` (drivers.<name>.runsOn), or null: the local mode runs
   * only its own. Refused before anything else, naming the file, line and field.
   */
  refuseHost?(host: string): string | null;
  /** Of the hosts the topology names, those no worker polls now (Temporal); the plan says so. */
  absentHosts?(hosts: readonly string[]): Promise<string[]>;
}

export interface PrepareRequest {
  source: TopologySource;
  /** Components to replace green-blue with no change (`--replace`). */
  replace?: readonly string[];
  /** false: plan from the record alone, without observing what runs (`--refresh=false`). */
  refresh?: boolean;
  /** The reviewed plan's id: refuse anything else (PLAN_STALE, PLAN_MISMATCH). */
  planId?: string;
  /** The serial a saved plan was planned against: refuse as stale when the live layout moved. */
  baseSerial?: number;
}

/** What a migration is created from; `held` is the caller's to release if it goes no further. */
export interface Prepared {
  desired: Topology;
  base: CurrentLayout;
  plan: Plan;
  /** Whether there is anything to do: false for a plan with no action, setting or drift. */
  needed: boolean;
  images?: ImageDigests;
  /** The stateful components switched under a write hold (MigrationSpec.switched); absent: none. */
  switched?: string[];
  held?: HeldEnvironment;
  /** The hosts the topology names that no worker polls now (MigrationHome.absentHosts); absent: none. */
  absentHosts?: string[];
}

/**
 * Prepares a migration to `request.source`. On any refusal the environment is released; with
 * nothing to do (`needed: false`) too. Otherwise the caller holds it and creates the migration.
 */
export async function prepareMigration(request: PrepareRequest, home: MigrationHome): Promise<Prepared> {
  const { source } = request;
  const loaded = loadTopology(source.text, { file: source.file });
  if (!loaded.ok) throw new TopologyInvalidError(loaded.diagnostics);
  const desired = loaded.topology;
  checkReplace(desired, request.replace, source.file);
  const certificates = await routeCertificateProblems(desired, source);
  if (certificates.length > 0) throw new TopologyInvalidError(certificates);
  refuseHosts(desired, source, home);
  const environment = desired.metadata.name;
  const held = home.hold?.(environment);
  try {
    const base = await home.layout(environment);
    if (request.planId !== undefined) refuseMovedLayout(request.planId, request.baseSerial, base);
    const secrets = home.secrets
      ? await planSecrets(desired, home.secrets.key, home.secrets.read.for(source.baseDir))
      : undefined;
    const images = await imageDigestsFor(desired, source.baseDir);
    // The drivers are loaded only for a topology with state (a plan's start-up stays as it was).
    const stateful = Object.values(desired.components).some((c) => c.stateful);
    const switchable = stateful
      ? switchableComponents(desired, (await import('../drivers/default-drivers.js')).defaultDrivers())
      : [];
    const known: PlanInputs = {
      ...(switchable.length === 0 ? {} : { switchable }),
      ...(request.replace === undefined ? {} : { replace: request.replace }),
      ...(secrets === undefined ? {} : { secrets }),
      ...(images === undefined ? {} : { images }),
    };
    // Observed once the environment is held: drift is planned and repaired like a change, and a
    // pinned plan is checked against the same observation.
    const inputs =
      request.refresh === false ? known : { ...known, observed: await home.observe(base, source.baseDir) };
    const plan = buildPlan(base, desired, inputs);
    const hosts = namedHosts(desired);
    const absentHosts = hosts.length > 0 && home.absentHosts ? await home.absentHosts(hosts) : [];
    if (absentHosts.length > 0 && plan.hosts) {
      plan.hosts = plan.hosts.map((h) =>
        h.host !== undefined && absentHosts.includes(h.host) ? { ...h, polled: false } : h,
      );
    }
    if (request.planId !== undefined && request.planId !== plan.planId) {
      throw await pinError(
        (serial) => home.layoutAt(environment, serial),
        request.planId,
        plan,
        desired,
        base,
        inputs,
        request.baseSerial !== undefined,
      );
    }
    const needed = !isEmptyPlan(plan);
    if (!needed) held?.release();
    const switched = (plan.stateful ?? []).filter((s) => s.how === 'switch').map((s) => s.component);
    const routeHosts = [...new Set(Object.keys(desired.routes).map((r) => routeHost(desired, r) ?? ''))];
    if (needed && switched.length > 0 && routeHosts.length > 1) {
      throw new CutoverError(
        'NOT_SUPPORTED',
        `${switched.join(', ')} switch${switched.length === 1 ? 'es' : ''} under a write hold, which holds every route at once, and the routes run on hosts ${routeHosts.sort().join(', ')}: put the routes on one host's router for this migration`,
      );
    }
    return {
      desired,
      base,
      plan,
      needed,
      ...(images === undefined ? {} : { images }),
      ...(switched.length === 0 ? {} : { switched }),
      ...(held === undefined || !needed ? {} : { held }),
      ...(absentHosts.length === 0 ? {} : { absentHosts }),
    };
  } catch (error) {
    held?.release();
    throw error;
  }
}

/** The hosts this mode cannot run (MigrationHome.refuseHost): one line each, with file, line and field. */
function refuseHosts(desired: Topology, source: TopologySource, home: MigrationHome): void {
  const refuse = home.refuseHost;
  if (refuse === undefined) return;
  const problems = runsOnProblems(desired, (host) => refuse(host));
  if (problems.length === 0) return;
  const lines = locateProblems(source.file, source.text, problems).map(formatDiagnostic);
  throw new CutoverError('NOT_SUPPORTED', lines.join('\n'));
}

/** Who starts a migration, with what parallelism, and when (the parts of a spec a start request gives). */
export interface SpecRequest {
  startedBy?: string;
  /** `rollback --to`: the recorded layout it goes back to. */
  rolledBackTo?: RolledBackTo;
  commit?: string | null;
  commitFrom?: CommitOrigin;
  appliedCommit?: string | null;
  parallelism?: number;
  now?: number;
}

/** The spec of the migration `prepared` describes, as every mode records it. */
export function migrationSpec(
  id: string,
  prepared: Prepared,
  baseDir: string,
  request: SpecRequest,
  whoRunsThis: () => string,
): MigrationSpec {
  return {
    id,
    environment: prepared.desired.metadata.name,
    plan: prepared.plan,
    desired: prepared.desired,
    base: prepared.base,
    baseDir,
    createdAt: request.now ?? Date.now(),
    ...auditOf(request, whoRunsThis),
    parallelism: migrationParallelism(prepared.desired, request.parallelism),
    ...(prepared.images === undefined ? {} : { images: prepared.images }),
    ...(prepared.switched === undefined ? {} : { switched: prepared.switched }),
  };
}
