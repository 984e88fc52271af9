/**
 * Migrations in Temporal mode: the same operations as engine/services/migrations.ts (create, list, show,
 * logs, verbs, the current layout), carried out through `@temporalio/client`. One migration in
 * flight per environment comes from the workflow id (`cutover-migration-<environment>`) and a
 * conflict policy that fails the second start; listing uses visibility with search attributes.
 */
import {
  type Client,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  type WorkflowHandle,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { downFailed, refuseUnknownEnvironment } from '../../core/down-parts.js';
import { CutoverError } from '../../core/errors.js';
import { type CurrentLayout, emptyLayout } from '../../core/layout.js';
import { refuseResolve } from '../../core/migration/resolve-policy.js';
import { migrationParallelism } from '../../core/migration/step.js';
import { describeLifecycle, type MigrationSummary, summaryOf } from '../../core/migration/summary.js';
import type { CommitOrigin, LogLine } from '../../core/migration/types.js';
import {
  isFinal,
  type Lifecycle,
  type MigrationSpec,
  type MigrationState,
  type Verb,
  type VerbOptions,
} from '../../core/migration/types.js';
import { upgradeState } from '../../core/migration/upgrade-state.js';
import { clock, refuseVerb } from '../../core/migration/verb-policy.js';
import type { CloudEvent } from '../../core/notify/types.js';
import type { ObservedLayout } from '../../core/observed.js';
import { buildPlan } from '../../core/plan/build-plan.js';
import { loadTopology } from '../../core/topology/load-topology.js';
import { osUserName } from '../../platform/os-user.js';
import { TopologyInvalidError } from '../api.js';
import { imageDigestsFor } from '../drivers/container-images.js';
import { planSecrets } from '../secrets/resolve-secrets.js';
import {
  auditOf,
  type CreateResult,
  checkReplace,
  newMigrationId,
  pinError,
  refuseMovedLayout,
} from '../services/migration-common.js';
import type { ResolveRequest } from '../services/service-types.js';
import { keptLayouts } from '../store/layout-store.js';
import type { StateDir } from '../store/state-dir.js';
import { type TemporalSettings, withDeadline } from './connection.js';
import { storedSize } from './payload-codec.js';
import { followTemporalEvents } from './temporal-event-feed.js';
import { callTimeoutMs, TemporalSession } from './temporal-session.js';
import {
  downWorkflow,
  environmentWorkflow,
  environmentWorkflowId,
  keepLayoutsSignal,
  layoutAtQuery,
  layoutQuery,
  type MigrationStatus,
  migrationWorkflow,
  migrationWorkflowId,
  observeWorkflow,
  observeWorkflowId,
  type ResolveArgs,
  resolveUpdate,
  statusQuery,
  verbUpdate,
} from './workflows.js';

export interface TemporalCreateRequest {
  text: string;
  file: string;
  baseDir: string;
  planId?: string;
  /** The serial a saved plan was planned against: refuse as stale when the live layout moved. */
  baseSerial?: number;
  /** Who starts it (default: the OS user of this process) and from which commit (audit). */
  startedBy?: string;
  commit?: string | null;
  commitFrom?: CommitOrigin;
  appliedCommit?: string | null;
  /** Components to replace green-blue with no change (`migrate --replace`). */
  replace?: readonly string[];
  /** How many driver calls run at once (`--parallelism`); default: the topology's strategy.parallelism, else 10. */
  parallelism?: number;
  now?: number;
  /**
   * The state directory whose key hashes the secrets for this plan (read in this process): given,
   * a changed secret is seen; the worker records its digests with the key of its own state directory.
   */
  secretsFrom?: StateDir;
}

interface Located {
  handle: WorkflowHandle<typeof migrationWorkflow>;
  running: boolean;
}

export class TemporalMigrations {
  private constructor(private readonly temporal: TemporalSession) {}

  get settings(): TemporalSettings {
    return this.temporal.settings;
  }

  private get client(): Client {
    return this.temporal.client;
  }

  static async connect(settings: TemporalSettings): Promise<TemporalMigrations> {
    return new TemporalMigrations(await TemporalSession.connect(settings));
  }

  async close(): Promise<void> {
    await this.temporal.close();
  }

  /** The layout plans are computed against: kept by the environment's workflow. */
  async currentLayout(environment: string): Promise<CurrentLayout> {
    if (!(await this.temporal.workerPolls())) {
      // Nothing recorded yet needs no worker; a recorded layout is read through a query.
      const exists = await this.temporal.call('for the environment', () =>
        this.client.workflow
          .getHandle(environmentWorkflowId(environment))
          .describe()
          .then(
            () => true,
            (error: unknown) => {
              if (error instanceof WorkflowNotFoundError) return false;
              throw error;
            },
          ),
      );
      if (!exists) return emptyLayout(environment);
      throw this.temporal.noWorker('reading the current layout');
    }
    return this.temporal.call('for the current layout', async () => {
      try {
        return await this.client.workflow.getHandle(environmentWorkflowId(environment)).query(layoutQuery);
      } catch (error) {
        if ((error as Error).name === 'WorkflowNotFoundError') return emptyLayout(environment);
        throw error;
      }
    });
  }

  /** An earlier layout, while the environment's workflow keeps it (the last 20, fewer when large). */
  async layoutAt(environment: string, serial: number): Promise<CurrentLayout | null> {
    if (serial === 0) return emptyLayout(environment);
    // A query needs a worker; without one it would wait for the deadline and say less.
    if (!(await this.temporal.workerPolls())) throw this.temporal.noWorker('reading an earlier layout');
    return this.temporal.call('for an earlier layout', async () => {
      try {
        return await this.client.workflow
          .getHandle(environmentWorkflowId(environment))
          .query(layoutAtQuery, serial);
      } catch (error) {
        if ((error as Error).name === 'WorkflowNotFoundError') return null;
        throw error;
      }
    });
  }

  /**
   * What runs of `layout`, observed by a worker of the task queue (the drivers' records are on the
   * workers' machines, not necessarily this one): a short workflow whose one activity runs
   * observeLayout there. Bounded: with no worker, or none answering, one line says so.
   */
  async observe(layout: CurrentLayout, fallbackBaseDir?: string): Promise<ObservedLayout> {
    if (!layout.topology) {
      // Nothing recorded: nothing to look at, and no worker needed to say so.
      return {
        environment: layout.environment,
        observedAt: new Date().toISOString(),
        components: {},
        routes: {},
      };
    }
    if (!(await this.temporal.workerPolls())) throw this.temporal.noWorker('observing what runs');
    const workflowId = observeWorkflowId(layout.environment, newMigrationId().replace(/^mig_/, ''));
    const handle = await this.temporal.call('to start observing what runs', () =>
      this.client.workflow.start(observeWorkflow, {
        workflowId,
        taskQueue: this.settings.taskQueue,
        args: [{ layout, ...(fallbackBaseDir === undefined ? {} : { fallbackBaseDir }) }],
        // Ends by itself when no worker takes it: nothing is left waiting in Temporal.
        workflowExecutionTimeout: observeDeadlineMs,
      }),
    );
    try {
      return await withDeadline(handle.result(), observeDeadlineMs);
    } catch (error) {
      if (error instanceof WorkflowFailedError && !/timed out/i.test(rootCause(error).message)) {
        throw new CutoverError(
          'DRIVER_FAILED',
          `observing what runs of ${layout.environment} failed on a worker (workflow ${workflowId}): ${rootCause(error).message}`,
        );
      }
      throw new CutoverError(
        'RUNNER_UNREACHABLE',
        `no worker observed what runs of ${layout.environment} within ${observeDeadlineMs / 1000} s (workflow ${workflowId} on task queue "${this.settings.taskQueue}"): is a \`cutover worker\` running and answering?`,
      );
    }
  }

  async create(request: TemporalCreateRequest): Promise<CreateResult> {
    // Read here, where the environment is (the workflow cannot), and a bad value refused before anything runs.
    const keep = keptLayouts();
    const loaded = loadTopology(request.text, { file: request.file });
    if (!loaded.ok) throw new TopologyInvalidError(loaded.diagnostics);
    const desired = loaded.topology;
    checkReplace(desired, request.replace, request.file);
    const environment = desired.metadata.name;
    const base = await this.currentLayout(environment);
    if (request.planId !== undefined) refuseMovedLayout(request.planId, request.baseSerial, base);
    // Observed by a worker, as `plan` observes: drift is planned and repaired like a change, and a
    // pinned plan is checked against the same observation.
    const observed = await this.observe(base, request.baseDir);
    const secrets = request.secretsFrom
      ? await planSecrets(desired, request.secretsFrom, request.baseDir)
      : undefined;
    const images = await imageDigestsFor(desired, request.baseDir);
    const inputs = {
      observed,
      ...(request.replace === undefined ? {} : { replace: request.replace }),
      ...(secrets === undefined ? {} : { secrets }),
      ...(images === undefined ? {} : { images }),
    };
    const plan = buildPlan(base, desired, inputs);
    if (request.planId !== undefined && request.planId !== plan.planId) {
      const envHandle = this.client.workflow.getHandle(environmentWorkflowId(environment));
      throw await pinError(
        (serial) =>
          this.temporal
            .call('for an earlier layout', () => envHandle.query(layoutAtQuery, serial))
            .catch(() => null),
        request.planId,
        plan,
        desired,
        base,
        inputs,
        request.baseSerial !== undefined,
      );
    }
    if (plan.actions.length === 0 && plan.settings.length === 0) return { created: false, plan };
    const spec: MigrationSpec = {
      id: newMigrationId(),
      environment,
      plan,
      desired,
      base,
      baseDir: request.baseDir,
      createdAt: request.now ?? Date.now(),
      ...auditOf(request, osUserName),
      parallelism: migrationParallelism(desired, request.parallelism),
      ...(images === undefined ? {} : { images }),
    };
    await refuseOversizedSpec(spec);
    await this.temporal.call('to start the environment workflow', () =>
      this.client.workflow.signalWithStart(environmentWorkflow, {
        workflowId: environmentWorkflowId(environment),
        taskQueue: this.settings.taskQueue,
        args: [{ environment, keep }],
        signal: keepLayoutsSignal,
        signalArgs: [keep],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    );
    try {
      await this.temporal.call('to start the migration', () =>
        this.client.workflow.start(migrationWorkflow, {
          workflowId: migrationWorkflowId(environment),
          taskQueue: this.settings.taskQueue,
          args: [{ spec }],
          workflowIdConflictPolicy: 'FAIL',
          workflowIdReusePolicy: 'ALLOW_DUPLICATE',
          searchAttributes: {
            CutoverEnvironment: [environment],
            CutoverMigrationId: [spec.id],
            CutoverState: ['running'],
          },
          memo: { migrationId: spec.id },
        }),
      );
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) throw await this.conflict(environment);
      throw error;
    }
    return { created: true, spec };
  }

  /**
   * `topology down`: a workflow under the environment's migration id (so it and a migration exclude
   * each other) stops every route and live slot on the workers, then records an empty layout.
   */
  async down(
    environment: string,
    options: { fallbackBaseDir: string; log: (line: string) => void; volumes?: boolean },
  ): Promise<{ components: string[]; routes: string[] }> {
    if (options.volumes) {
      throw new CutoverError(
        'NOT_SUPPORTED',
        `topology down --volumes is not supported in Temporal mode yet; take ${environment} down without it, then remove its volumes with the engine (podman volume rm, label dev.cutover.environment=${environment})`,
      );
    }
    // Refused while a migration is in flight, even before its first commit (nothing to take down yet).
    if ((await this.inFlight(environment)) !== null) throw await this.conflict(environment);
    const layout = await this.currentLayout(environment);
    refuseUnknownEnvironment(layout, 'Temporal');
    if (!layout.topology) return { components: [], routes: [] };
    const downId = `down_${newMigrationId().replace(/^mig_/, '')}`;
    let handle: WorkflowHandle<typeof downWorkflow>;
    try {
      handle = await this.temporal.call('to start taking it down', () =>
        this.client.workflow.start(downWorkflow, {
          workflowId: migrationWorkflowId(environment),
          taskQueue: this.settings.taskQueue,
          args: [{ layout, downId, fallbackBaseDir: options.fallbackBaseDir }],
          workflowIdConflictPolicy: 'FAIL',
          workflowIdReusePolicy: 'ALLOW_DUPLICATE',
          memo: { migrationId: downId },
        }),
      );
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) throw await this.conflict(environment);
      throw error;
    }
    let result: Awaited<ReturnType<typeof downWorkflow>>;
    try {
      result = await withDeadline(handle.result(), downDeadlineMs);
    } catch (error) {
      if (error instanceof WorkflowFailedError) throw downFailed(environment, null, rootCause(error));
      if (/no answer within/.test((error as Error).message)) {
        throw new CutoverError(
          'RUNNER_UNREACHABLE',
          `${environment} is not down within ${downDeadlineMs / 60_000} minutes; it goes on in Temporal as workflow ${migrationWorkflowId(environment)}: is a worker running (cutover worker)?`,
        );
      }
      throw error;
    }
    for (const line of result.logs) options.log(line.message);
    await this.confirmEmpty(environment, layout.serial);
    return { components: result.components, routes: result.routes };
  }

  /**
   * The empty layout is recorded (the environment workflow takes the signal a moment later). A
   * migration that committed between the layout read and the take-down's start was not taken down:
   * the signal is then refused, and this says so.
   */
  private async confirmEmpty(environment: string, before: number): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const after = await this.currentLayout(environment);
      if (after.serial > before) {
        if (after.serial === before + 1 && after.topology === null) return;
        throw new CutoverError(
          'MIGRATION_CONFLICT',
          `${environment} changed while it was taken down (serial ${after.serial} was committed); run \`cutover topology down\` again`,
        );
      }
      if (Date.now() > deadline) {
        throw new CutoverError(
          'RUNNER_UNREACHABLE',
          `${environment}: everything was stopped, but the empty layout is not recorded yet; run \`cutover topology down\` again`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /**
   * The migration or take-down in flight for an environment (its id), from the one workflow id they
   * share: one call, no visibility lag.
   */
  async inFlight(environment: string): Promise<string | null> {
    try {
      const described = await this.temporal.call('to look for a migration in flight', () =>
        this.client.workflow.getHandle(migrationWorkflowId(environment)).describe(),
      );
      if (described.status.name !== 'RUNNING') return null;
      const id = (described.memo as { migrationId?: unknown } | undefined)?.migrationId;
      return typeof id === 'string' ? id : described.runId;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return null;
      throw error;
    }
  }

  private async conflict(environment: string): Promise<CutoverError> {
    let holder = '(unknown)';
    let detail = '';
    const handle = this.client.workflow.getHandle<typeof migrationWorkflow>(migrationWorkflowId(environment));
    try {
      const described = await withDeadline(handle.describe(), callTimeoutMs);
      holder = String((described.memo as { migrationId?: string } | undefined)?.migrationId ?? holder);
      // Where it stands, as local mode says it (a query: it needs a worker, so briefly).
      const { state } = await withDeadline(handle.query(statusQuery, Number.MAX_SAFE_INTEGER), 3_000);
      detail = ` (${describeLifecycle(state)}, started ${clock(state.startedAt)})`;
    } catch {
      // described as far as known
    }
    return new CutoverError(
      'MIGRATION_CONFLICT',
      `environment ${environment} already has a migration in flight: ${holder}${detail}`,
      { migrationId: holder },
    );
  }

  /** Migrations known to visibility, newest first. */
  async list(filter: { environment?: string; state?: Lifecycle }): Promise<MigrationSummary[]> {
    const clauses = [`WorkflowType = 'migrationWorkflow'`, `ExecutionStatus != 'ContinuedAsNew'`];
    if (filter.environment !== undefined) clauses.push(`CutoverEnvironment = '${quote(filter.environment)}'`);
    if (filter.state !== undefined) clauses.push(`CutoverState = '${quote(filter.state)}'`);
    const ids: string[] = [];
    await this.temporal.call('to list migrations', async () => {
      for await (const execution of this.client.workflow.list({ query: clauses.join(' AND ') })) {
        const id = (execution.memo as { migrationId?: string } | undefined)?.migrationId;
        if (typeof id === 'string' && !ids.includes(id)) ids.push(id);
      }
    });
    const summaries: MigrationSummary[] = [];
    for (const id of ids.sort().reverse()) {
      try {
        summaries.push((await this.show(id)).summary);
      } catch (error) {
        if (!(error instanceof CutoverError && error.code === 'MIGRATION_NOT_FOUND')) throw error;
      }
    }
    return summaries;
  }

  /** A full id from an id or a unique prefix. */
  async find(prefix: string): Promise<string> {
    const wanted = (prefix.startsWith('mig_') ? prefix : `mig_${prefix}`).toLowerCase();
    if (/^mig_[0-9a-z]{26}$/.test(wanted)) return wanted;
    const all = (await this.list({})).map((m) => m.id).filter((id) => id.startsWith(wanted));
    if (all.length === 1) return all[0] as string;
    if (all.length === 0) {
      throw new CutoverError(
        'MIGRATION_NOT_FOUND',
        `no migration ${prefix} in Temporal (${this.settings.address})`,
      );
    }
    throw new CutoverError(
      'MIGRATION_AMBIGUOUS',
      `${prefix} matches ${all.length} migrations: ${all.slice(0, 5).join(', ')}`,
    );
  }

  private async locate(id: string): Promise<Located> {
    let found: { runId: string; workflowId: string; running: boolean; startedAt: number }[] = [];
    // Visibility lags a start by a moment: look again briefly before saying it is not there.
    for (let attempt = 0; attempt < 10 && found.length === 0; attempt++) {
      if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 200));
      const runs: typeof found = [];
      await this.temporal.call('to find the migration', async () => {
        for await (const execution of this.client.workflow.list({
          query: `WorkflowType = 'migrationWorkflow' AND CutoverMigrationId = '${quote(id)}'`,
        })) {
          runs.push({
            runId: execution.runId,
            workflowId: execution.workflowId,
            running: execution.status.name === 'RUNNING',
            startedAt: execution.startTime.getTime(),
          });
        }
      });
      found = runs;
    }
    // After a continue-as-new, or a resolve, a migration has several runs: the running one, else
    // the last started (which went on from where the others ended).
    const pick = found.find((f) => f.running) ?? [...found].sort((a, b) => b.startedAt - a.startedAt)[0];
    if (!pick)
      throw new CutoverError(
        'MIGRATION_NOT_FOUND',
        `no migration ${id} in Temporal (${this.settings.address})`,
      );
    return {
      handle: this.client.workflow.getHandle<typeof migrationWorkflow>(pick.workflowId, pick.runId),
      running: pick.running,
    };
  }

  private async status(located: Located, afterSeq: number): Promise<MigrationStatus> {
    if (located.running && !(await this.temporal.workerPolls()))
      throw this.temporal.noWorker('the status of a running migration');
    const status = await this.temporal.call('for the migration status', () =>
      located.running ? located.handle.query(statusQuery, afterSeq) : located.handle.result(),
    );
    // A workflow of an earlier version keeps its state in the older shape (one command in flight).
    return { ...status, state: upgradeState(status.state) };
  }

  async show(id: string): Promise<{ summary: MigrationSummary; state: MigrationState }> {
    const status = await this.status(await this.locate(id), Number.MAX_SAFE_INTEGER);
    return { summary: summaryOf(status.state), state: status.state };
  }

  /** GET /v1/events: every migration's notifications, as the workflows derived them (polled). */
  events(options: { signal: AbortSignal; after?: string }): AsyncGenerator<CloudEvent> {
    return followTemporalEvents(this.client, options);
  }

  async *logs(
    id: string,
    options: { follow: boolean; signal?: AbortSignal; pollMs?: number },
  ): AsyncGenerator<LogLine> {
    let located = await this.locate(id);
    let seen = 0;
    for (;;) {
      const status = await this.status(located, seen);
      for (const line of status.logs) {
        if (line.seq <= seen) continue;
        seen = line.seq;
        const { seq: _seq, ...plain } = line;
        yield plain;
      }
      if (!options.follow || isFinal(status.state.lifecycle) || options.signal?.aborted) return;
      await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 300));
      if (located.running) located = await this.locate(id);
    }
  }

  /**
   * Undo steps left for a person (`resolve --retry|--skip`). The migration has ended, so its
   * workflow has too: a new run of it (the environment's migration workflow id, so never beside
   * another migration in flight) goes on from where it ended and takes the resolve Update, sent with
   * its start and checked by the Update's validator; a retry then runs the steps as undo steps again.
   */
  async resolve(id: string, request: ResolveRequest, by?: string): Promise<MigrationState> {
    const located = await this.locate(id);
    const { state, logs } = await this.status(located, 0);
    // Checked here too, so that a refused resolve starts no run (the validator decides in the end).
    const refusal = refuseResolve(state, request.step);
    if (refusal !== null) throw new CutoverError('VERB_REFUSED', refusal);
    const environment = state.spec.environment;
    if (request.how === 'retry') {
      // Undo steps act on the routes and slots as they were when this migration ended: after a
      // later commit they could undo someone else's work.
      const layout = await this.currentLayout(environment);
      if (layout.serial !== state.spec.base.serial) {
        throw new CutoverError(
          'VERB_REFUSED',
          `cannot retry the undo steps of ${id}: ${environment} has changed since (layout serial ${state.spec.base.serial} → ${layout.serial}), and they could undo that change; clean up by hand and \`resolve ${id} --skip\``,
        );
      }
    }
    if (!(await this.temporal.workerPolls())) throw this.temporal.noWorker('resolving undo steps');
    const { spec, ...rest } = state;
    const args: ResolveArgs = {
      migrationId: id,
      how: request.how,
      ...(request.step === undefined ? {} : { step: request.step }),
      ...(by === undefined ? {} : { by }),
    };
    const seq = logs.reduce((max, line) => Math.max(max, line.seq), 0);
    const startWorkflowOperation = new WithStartWorkflowOperation(migrationWorkflow, {
      workflowId: migrationWorkflowId(environment),
      taskQueue: this.settings.taskQueue,
      args: [{ spec, resume: { state: rest, logs, seq }, resolving: true }],
      // A migration in flight gets the Update instead, and its validator refuses it, naming itself.
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      searchAttributes: {
        CutoverEnvironment: [environment],
        CutoverMigrationId: [id],
        CutoverState: [state.lifecycle],
      },
      memo: { migrationId: id },
    });
    try {
      return await this.temporal.call('to resolve', () =>
        this.client.workflow.executeUpdateWithStart(resolveUpdate, { args: [args], startWorkflowOperation }),
      );
    } catch (error) {
      if (error instanceof WorkflowUpdateFailedError) {
        const cause = (error.cause as Error | undefined)?.message ?? error.message;
        throw new CutoverError('VERB_REFUSED', cause);
      }
      throw error;
    }
  }

  async verb(
    id: string,
    verb: Verb,
    by?: string,
    options: VerbOptions = {},
  ): Promise<{ summary: MigrationSummary; recovered: boolean }> {
    for (let attempt = 1; ; attempt++) {
      const located = await this.locate(id);
      if (!located.running) {
        const { state } = await this.status(located, Number.MAX_SAFE_INTEGER);
        throw new CutoverError('VERB_REFUSED', refuseVerb(state, verb) ?? `cannot ${verb} ${id} now`);
      }
      if (!(await this.temporal.workerPolls())) throw this.temporal.noWorker(`to ${verb} a migration`);
      try {
        const state = await this.temporal.call(`to ${verb}`, () =>
          // The third argument only when given: updates of workflows started before it take two.
          located.handle.executeUpdate(verbUpdate, {
            args: options.full ? [verb, by, { full: true }] : [verb, by],
          }),
        );
        return { summary: summaryOf(upgradeState(state)), recovered: false };
      } catch (error) {
        if (error instanceof WorkflowUpdateFailedError) {
          const cause = (error.cause as Error | undefined)?.message ?? error.message;
          throw new CutoverError('VERB_REFUSED', cause);
        }
        // The run ended, or continued as new, since it was found (visibility lags a moment):
        // look again; the refusal then comes from its final state.
        if (!(error instanceof WorkflowNotFoundError)) throw error;
        if (attempt >= 3) {
          const { state } = await this.status({ ...located, running: false }, Number.MAX_SAFE_INTEGER);
          throw new CutoverError('VERB_REFUSED', refuseVerb(state, verb) ?? `cannot ${verb} ${id} now`);
        }
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    }
  }
}

function quote(value: string): string {
  return value.replace(/['\\]/g, '');
}

/**
 * Temporal refuses a payload over 2 MB, and a migration's whole state (its spec, then its slots and
 * recent log lines) must fit in one: the workflow's input, an update's result, a continue-as-new.
 * Refused up front, with the reason, rather than as a workflow that fails to start or stops midway.
 */
export const maxStoredSpecBytes = 1_250_000;

async function refuseOversizedSpec(spec: MigrationSpec): Promise<void> {
  const size = await storedSize(spec);
  if (size <= maxStoredSpecBytes) return;
  const components = Object.keys(spec.desired.components).length;
  const mb = (n: number) => `${(n / 1_000_000).toFixed(2)} MB`;
  throw new CutoverError(
    'TOPOLOGY_TOO_LARGE',
    `the migration of ${spec.environment} (${components.toLocaleString('en-US')} components) is ${mb(size)} as Temporal stores it, compressed; ` +
      `a migration's state must fit in one Temporal payload (2 MB), so at most ${mb(maxStoredSpecBytes)} is accepted. ` +
      'Run this migration with the local runner (without WORKFLOW_HOST)',
  );
}

/**
 * The longest a look at what runs may take, from the start of its workflow: a worker takes it,
 * its drivers answer within 10 s each (at once), and one retry on another worker fits.
 */
const observeDeadlineMs = 45_000;

/** The longest `topology down` waits for its workflow (processes get their stop timeouts one by one). */
const downDeadlineMs = 10 * 60_000;

/** The innermost cause of a failure (a workflow failed because an activity failed because…). */
function rootCause(error: Error): Error {
  let e = error;
  while (e.cause instanceof Error) e = e.cause;
  return e;
}
