/**
 * Finding and reading migrations in Temporal mode: the one in flight for an environment (from the
 * workflow id they share), the list and a prefix's migration (visibility, with search
 * attributes), a migration's state and log lines (a query of a running one, the result of one
 * that ended), and the conflict a second start meets.
 */
import { type WorkflowHandle, WorkflowNotFoundError } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { CutoverError } from '../../core/errors.js';
import { commandHost } from '../../core/migration/command-host.js';
import { start as startState } from '../../core/migration/step.js';
import { describeLifecycle, type MigrationSummary, summaryOf } from '../../core/migration/summary.js';
import {
  isFinal,
  type Lifecycle,
  type LogLine,
  type MigrationSpec,
  type MigrationState,
} from '../../core/migration/types.js';
import { upgradeState } from '../../core/migration/upgrade-state.js';
import { clock } from '../../core/migration/verb-policy.js';
import { withDeadline } from './connection.js';
import { hostsWaiting } from './host-wait.js';
import type { migrationWorkflow } from './migration-workflow.js';
import { payloadCodec } from './payload-codec.js';
import { callTimeoutMs, type TemporalSession } from './temporal-session.js';
import { hostQueue, type MigrationStatus, migrationWorkflowId, statusQuery } from './workflow-definitions.js';

/** A migration's workflow run: the running one, else the last started. */
export interface Located {
  handle: WorkflowHandle<typeof migrationWorkflow>;
  running: boolean;
}

/**
 * The migration or take-down in flight for an environment (its id), from the one workflow id they
 * share: one call, no visibility lag.
 */
export async function inFlight(temporal: TemporalSession, environment: string): Promise<string | null> {
  try {
    const described = await temporal.call('to look for a migration in flight', () =>
      temporal.client.workflow.getHandle(migrationWorkflowId(environment)).describe(),
    );
    if (described.status.name !== 'RUNNING') return null;
    const id = (described.memo as { migrationId?: unknown } | undefined)?.migrationId;
    return typeof id === 'string' ? id : described.runId;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return null;
    throw error;
  }
}

/** MIGRATION_CONFLICT naming the migration in flight and, as local mode says it, where it stands. */
export async function conflict(temporal: TemporalSession, environment: string): Promise<CutoverError> {
  let holder = '(unknown)';
  let detail = '';
  const handle = temporal.client.workflow.getHandle<typeof migrationWorkflow>(
    migrationWorkflowId(environment),
  );
  try {
    const described = await withDeadline(handle.describe(), callTimeoutMs);
    holder = String((described.memo as { migrationId?: string } | undefined)?.migrationId ?? holder);
    // Where it stands (a query: it needs a worker, so briefly).
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

/**
 * Migrations known to visibility, newest first: those of this deployment's task queue. A namespace
 * may hold other deployments' (their own queues, their own workers); their status needs their
 * worker, and one that was not there failed the whole list, naming this queue.
 */
export async function list(
  temporal: TemporalSession,
  filter: { environment?: string; state?: Lifecycle },
): Promise<MigrationSummary[]> {
  const clauses = [
    `WorkflowType = 'migrationWorkflow'`,
    `ExecutionStatus != 'ContinuedAsNew'`,
    ownQueue(temporal.settings.taskQueue),
  ];
  if (filter.environment !== undefined) clauses.push(`CutoverEnvironment = '${quote(filter.environment)}'`);
  if (filter.state !== undefined) clauses.push(`CutoverState = '${quote(filter.state)}'`);
  const ids: string[] = [];
  await temporal.call('to list migrations', async () => {
    for await (const execution of temporal.client.workflow.list({ query: clauses.join(' AND ') })) {
      const id = (execution.memo as { migrationId?: string } | undefined)?.migrationId;
      if (typeof id === 'string' && !ids.includes(id)) ids.push(id);
    }
  });
  const summaries: MigrationSummary[] = [];
  for (const id of ids.sort().reverse()) {
    try {
      summaries.push((await show(temporal, id)).summary);
    } catch (error) {
      if (error instanceof CutoverError && error.code === 'MIGRATION_NOT_FOUND') continue;
      // A running one with no worker to answer for it: listed as it was started, saying so.
      const waiting = await startedSummary(temporal, id, error);
      if (waiting) summaries.push(waiting);
      else throw error;
    }
  }
  return summaries;
}

/** A full id from an id or a unique prefix. */
export async function find(temporal: TemporalSession, prefix: string): Promise<string> {
  const wanted = (prefix.startsWith('mig_') ? prefix : `mig_${prefix}`).toLowerCase();
  if (/^mig_[0-9a-z]{26}$/.test(wanted)) return wanted;
  const all = (await list(temporal, {})).map((m) => m.id).filter((id) => id.startsWith(wanted));
  if (all.length === 1) return all[0] as string;
  if (all.length === 0) {
    throw new CutoverError(
      'MIGRATION_NOT_FOUND',
      `no migration ${prefix} in Temporal (${temporal.settings.address})`,
    );
  }
  throw new CutoverError(
    'MIGRATION_AMBIGUOUS',
    `${prefix} matches ${all.length} migrations: ${all.slice(0, 5).join(', ')}`,
  );
}

/** The workflow run of a migration, found through visibility. */
export async function locate(temporal: TemporalSession, id: string): Promise<Located> {
  let found: { runId: string; workflowId: string; running: boolean; startedAt: number }[] = [];
  // Visibility lags a start by a moment: look again briefly before saying it is not there.
  for (let attempt = 0; attempt < 10 && found.length === 0; attempt++) {
    if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 200));
    const runs: typeof found = [];
    await temporal.call('to find the migration', async () => {
      for await (const execution of temporal.client.workflow.list({
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
      `no migration ${id} in Temporal (${temporal.settings.address})`,
    );
  return {
    handle: temporal.client.workflow.getHandle<typeof migrationWorkflow>(pick.workflowId, pick.runId),
    running: pick.running,
  };
}

/** The state and the log lines after `afterSeq`: a query of a running run, the result of an ended one. */
export async function status(
  temporal: TemporalSession,
  located: Located,
  afterSeq: number,
): Promise<MigrationStatus> {
  if (located.running && !(await temporal.workerPolls()))
    throw temporal.noWorker('the status of a running migration');
  const status = await temporal.call('for the migration status', () =>
    located.running ? located.handle.query(statusQuery, afterSeq) : located.handle.result(),
  );
  // A workflow of an earlier version keeps its state in the older shape (one command in flight).
  return { ...status, state: upgradeState(status.state) };
}

export async function show(
  temporal: TemporalSession,
  id: string,
): Promise<{ summary: MigrationSummary; state: MigrationState }> {
  const located = await locate(temporal, id);
  const found = await status(temporal, located, Number.MAX_SAFE_INTEGER);
  return {
    summary: await withHostWait(temporal, located, found.state, summaryOf(found.state)),
    state: found.state,
  };
}

/**
 * A migration whose calls in flight wait in a host's queue that no worker polls (command-host.ts):
 * its status says so, "waiting for a worker on host b (none polling since 21:03:10)", in show,
 * list, status and the API alike. Asked only when a call in flight is placed on a host. Seen two
 * ways: a call of the workflow scheduled on the host's queue and not taken for a few seconds
 * (host-wait.ts: a live worker takes it at once), or, when none waits so, no poller of the host
 * seen for stalePollerMs (Temporal's poller list). The time is when the host last polled, if known.
 */
async function withHostWait(
  temporal: TemporalSession,
  located: Located,
  state: MigrationState,
  summary: MigrationSummary,
): Promise<MigrationSummary> {
  if (isFinal(state.lifecycle) || !located.running) return summary;
  const placed = new Set<string>();
  for (const command of state.inflight) {
    const host = commandHost(state.spec, command);
    if (host !== undefined) placed.add(host);
  }
  if (placed.size === 0) return summary;
  const hosts = [...placed].sort();
  const described = await temporal.call('for the calls in flight', () => located.handle.describe());
  const unstarted = hostsWaiting(
    described.raw.pendingActivities ?? [],
    hosts,
    (host) => hostQueue(described.taskQueue, host),
    Date.now(),
  );
  const waits: string[] = [];
  for (const host of hosts) {
    const { polled, lastSeen } = await temporal.hostPollers(host);
    if (polled && !unstarted.includes(host)) continue;
    const since = lastSeen === null ? '' : ` since ${clock(lastSeen)}`;
    waits.push(`waiting for a worker on host ${host} (none polling${since})`);
  }
  return waits.length === 0 ? summary : { ...summary, status: `${summary.status}; ${waits.join('; ')}` };
}

export async function* logs(
  temporal: TemporalSession,
  id: string,
  options: { follow: boolean; signal?: AbortSignal; pollMs?: number },
): AsyncGenerator<LogLine> {
  let located = await locate(temporal, id);
  let seen = 0;
  let saidQueued = false;
  for (;;) {
    // Started, and no worker to run it: a follower waits for one, saying so once (a worker that
    // comes picks the migration up where it is; without --follow, status says it in one line).
    if (options.follow && located.running && !(await temporal.workerPolls())) {
      if (!saidQueued) {
        saidQueued = true;
        yield { at: Date.now(), level: 'warn', kind: 'waiting_for_worker', message: temporal.queued() };
      }
      if (options.signal?.aborted) return;
      await new Promise((resolve) => setTimeout(resolve, Math.max(options.pollMs ?? 300, 1_000)));
      located = await locate(temporal, id);
      continue;
    }
    const now = await status(temporal, located, seen);
    for (const line of now.logs) {
      if (line.seq <= seen) continue;
      seen = line.seq;
      const { seq: _seq, ...plain } = line;
      yield plain;
    }
    if (!options.follow || isFinal(now.state.lifecycle) || options.signal?.aborted) return;
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 300));
    if (located.running) located = await locate(temporal, id);
  }
}

/**
 * A running migration no worker answers for (none polls): its summary as it was started (its
 * workflow's input, read from the history without a worker), its status saying what it waits for;
 * undefined when `error` is something else.
 */
async function startedSummary(
  temporal: TemporalSession,
  id: string,
  error: unknown,
): Promise<MigrationSummary | undefined> {
  if (!(error instanceof CutoverError && error.code === 'RUNNER_UNREACHABLE')) return undefined;
  if (await temporal.workerPolls()) return undefined;
  const located = await locate(temporal, id);
  if (!located.running) return undefined;
  const input = await temporal.call('for the migration as started', async () => {
    const history = await located.handle.fetchHistory();
    const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
    const [first] = await payloadCodec.decode(started?.input?.payloads?.slice(0, 1) ?? []);
    return first ? (defaultPayloadConverter.fromPayload(first) as { spec?: MigrationSpec }) : undefined;
  });
  if (!input?.spec) return undefined;
  const summary = summaryOf(startState(input.spec).state);
  return {
    ...summary,
    status: `waiting for a worker: none polls task queue "${temporal.settings.taskQueue}"`,
  };
}

/** The visibility clause of the migrations a deployment on `taskQueue` runs. */
export function ownQueue(taskQueue: string): string {
  return `TaskQueue = '${quote(taskQueue)}'`;
}

function quote(value: string): string {
  return value.replace(/['\\]/g, '');
}
