/**
 * Operating migrations in Temporal mode: an operator's verb (an Update of the running workflow,
 * checked by its validator) and `resolve` of undo steps left for a person (a new run of the
 * migration's workflow, started with the Update).
 */
import {
  WithStartWorkflowOperation,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { CutoverError } from '../../core/errors.js';
import { refuseResolve } from '../../core/migration/resolve-policy.js';
import { type MigrationSummary, summaryOf } from '../../core/migration/summary.js';
import type { MigrationState, Verb, VerbOptions } from '../../core/migration/types.js';
import { upgradeState } from '../../core/migration/upgrade-state.js';
import { refuseVerb } from '../../core/migration/verb-policy.js';
import type { ResolveRequest } from '../services/service-types.js';
import { migrationWorkflow } from './migration-workflow.js';
import { currentLayout } from './temporal-layouts.js';
import type { TemporalSession } from './temporal-session.js';
import { locate, status } from './temporal-visibility.js';
import { migrationWorkflowId, type ResolveArgs, resolveUpdate, verbUpdate } from './workflow-definitions.js';

export async function verb(
  temporal: TemporalSession,
  id: string,
  verb: Verb,
  by?: string,
  options: VerbOptions = {},
): Promise<{ summary: MigrationSummary; recovered: boolean }> {
  for (let attempt = 1; ; attempt++) {
    const located = await locate(temporal, id);
    if (!located.running) {
      const { state } = await status(temporal, located, Number.MAX_SAFE_INTEGER);
      throw new CutoverError('VERB_REFUSED', refuseVerb(state, verb) ?? `cannot ${verb} ${id} now`);
    }
    if (!(await temporal.workerPolls())) throw temporal.noWorker(`to ${verb} a migration`);
    try {
      const state = await temporal.call(`to ${verb}`, () =>
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
        const { state } = await status(temporal, { ...located, running: false }, Number.MAX_SAFE_INTEGER);
        throw new CutoverError('VERB_REFUSED', refuseVerb(state, verb) ?? `cannot ${verb} ${id} now`);
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  }
}

/**
 * Undo steps left for a person (`resolve --retry|--skip`). The migration has ended, so its
 * workflow has too: a new run of it (the environment's migration workflow id, so never beside
 * another migration in flight) goes on from where it ended and takes the resolve Update, sent with
 * its start and checked by the Update's validator; a retry then runs the steps as undo steps again.
 */
export async function resolve(
  temporal: TemporalSession,
  id: string,
  request: ResolveRequest,
  by?: string,
): Promise<MigrationState> {
  const located = await locate(temporal, id);
  const { state, logs } = await status(temporal, located, 0);
  // Checked here too, so that a refused resolve starts no run (the validator decides in the end).
  const refusal = refuseResolve(state, request.step);
  if (refusal !== null) throw new CutoverError('VERB_REFUSED', refusal);
  const environment = state.spec.environment;
  if (request.how === 'retry') {
    // Undo steps act on the routes and slots as they were when this migration ended: after a
    // later commit they could undo someone else's work.
    const layout = await currentLayout(temporal, environment);
    if (layout.serial !== state.spec.base.serial) {
      throw new CutoverError(
        'VERB_REFUSED',
        `cannot retry the undo steps of ${id}: ${environment} has changed since (layout serial ${state.spec.base.serial} → ${layout.serial}), and they could undo that change; clean up by hand and \`resolve ${id} --skip\``,
      );
    }
  }
  if (!(await temporal.workerPolls())) throw temporal.noWorker('resolving undo steps');
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
    taskQueue: temporal.settings.taskQueue,
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
    return await temporal.call('to resolve', () =>
      temporal.client.workflow.executeUpdateWithStart(resolveUpdate, {
        args: [args],
        startWorkflowOperation,
      }),
    );
  } catch (error) {
    if (error instanceof WorkflowUpdateFailedError) {
      const cause = (error.cause as Error | undefined)?.message ?? error.message;
      throw new CutoverError('VERB_REFUSED', cause);
    }
    throw error;
  }
}
