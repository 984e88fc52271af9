/**
 * Temporal mode's layouts and looks at what runs: the current and earlier layouts, kept by the
 * environment's workflow, and what runs of one, observed by a worker (the drivers' records are on
 * the workers' machines, not necessarily this one).
 */
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { CutoverError } from '../../core/errors.js';
import { type CurrentLayout, emptyLayout } from '../../core/layout.js';
import type { ObservedLayout } from '../../core/observed.js';
import { newMigrationId } from '../services/migration-common.js';
import { withDeadline } from './connection.js';
import { observeWorkflow } from './observe-workflow.js';
import type { TemporalSession } from './temporal-session.js';
import {
  environmentWorkflowId,
  layoutAtQuery,
  layoutQuery,
  observeWorkflowId,
} from './workflow-definitions.js';

/**
 * The longest a look at what runs may take, from the start of its workflow: a worker takes it,
 * its drivers answer within 10 s each (at once), and one retry on another worker fits.
 */
const observeDeadlineMs = 45_000;

/** The layout plans are computed against: kept by the environment's workflow. */
export async function currentLayout(temporal: TemporalSession, environment: string): Promise<CurrentLayout> {
  const { client } = temporal;
  if (!(await temporal.workerPolls())) {
    // Nothing recorded yet needs no worker; a recorded layout is read through a query.
    const exists = await temporal.call('for the environment', () =>
      client.workflow
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
    throw temporal.noWorker('reading the current layout');
  }
  return temporal.call('for the current layout', async () => {
    try {
      return await client.workflow.getHandle(environmentWorkflowId(environment)).query(layoutQuery);
    } catch (error) {
      if ((error as Error).name === 'WorkflowNotFoundError') return emptyLayout(environment);
      throw error;
    }
  });
}

/** An earlier layout, while the environment's workflow keeps it (the last 20, fewer when large). */
export async function layoutAt(
  temporal: TemporalSession,
  environment: string,
  serial: number,
): Promise<CurrentLayout | null> {
  if (serial === 0) return emptyLayout(environment);
  // A query needs a worker; without one it would wait for the deadline and say less.
  if (!(await temporal.workerPolls())) throw temporal.noWorker('reading an earlier layout');
  return temporal.call('for an earlier layout', async () => {
    try {
      return await temporal.client.workflow
        .getHandle(environmentWorkflowId(environment))
        .query(layoutAtQuery, serial);
    } catch (error) {
      if ((error as Error).name === 'WorkflowNotFoundError') return null;
      throw error;
    }
  });
}

/**
 * What runs of `layout`, observed by a worker of the task queue: a short workflow whose one
 * activity runs observeLayout there. Bounded: with no worker, or none answering, one line says so.
 */
export async function observe(
  temporal: TemporalSession,
  layout: CurrentLayout,
  fallbackBaseDir?: string,
): Promise<ObservedLayout> {
  if (!layout.topology) {
    // Nothing recorded: nothing to look at, and no worker needed to say so.
    return {
      environment: layout.environment,
      observedAt: new Date().toISOString(),
      components: {},
      routes: {},
    };
  }
  if (!(await temporal.workerPolls())) throw temporal.noWorker('observing what runs');
  const { taskQueue } = temporal.settings;
  const workflowId = observeWorkflowId(layout.environment, newMigrationId().replace(/^mig_/, ''));
  const handle = await temporal.call('to start observing what runs', () =>
    temporal.client.workflow.start(observeWorkflow, {
      workflowId,
      taskQueue,
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
      `no worker observed what runs of ${layout.environment} within ${observeDeadlineMs / 1000} s (workflow ${workflowId} on task queue "${taskQueue}"): is a \`cutover worker\` running and answering?`,
    );
  }
}

/** The innermost cause of a failure (a workflow failed because an activity failed because…). */
export function rootCause(error: Error): Error {
  let e = error;
  while (e.cause instanceof Error) e = e.cause;
  return e;
}
