/**
 * `topology down` in Temporal mode: a workflow under the environment's migration id (so it and a
 * migration exclude each other) stops every route and live slot on the workers, then records an
 * empty layout.
 */
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  type WorkflowHandle,
} from '@temporalio/client';
import { downFailed, refuseUnknownEnvironment } from '../../core/down-parts.js';
import { CutoverError } from '../../core/errors.js';
import { newMigrationId } from '../services/migration-common.js';
import { withDeadline } from './connection.js';
import { downWorkflow } from './down-workflow.js';
import { currentLayout, rootCause } from './temporal-layouts.js';
import type { TemporalSession } from './temporal-session.js';
import { conflict, inFlight } from './temporal-visibility.js';
import { migrationWorkflowId } from './workflow-definitions.js';

/** The longest `topology down` waits for its workflow (processes get their stop timeouts one by one). */
const downDeadlineMs = 10 * 60_000;

export async function down(
  temporal: TemporalSession,
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
  if ((await inFlight(temporal, environment)) !== null) throw await conflict(temporal, environment);
  const layout = await currentLayout(temporal, environment);
  refuseUnknownEnvironment(layout, 'Temporal');
  if (!layout.topology) return { components: [], routes: [] };
  const downId = `down_${newMigrationId().replace(/^mig_/, '')}`;
  let handle: WorkflowHandle<typeof downWorkflow>;
  try {
    handle = await temporal.call('to start taking it down', () =>
      temporal.client.workflow.start(downWorkflow, {
        workflowId: migrationWorkflowId(environment),
        taskQueue: temporal.settings.taskQueue,
        args: [{ layout, downId, fallbackBaseDir: options.fallbackBaseDir }],
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
        memo: { migrationId: downId },
      }),
    );
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) throw await conflict(temporal, environment);
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
  await confirmEmpty(temporal, environment, layout.serial);
  return { components: result.components, routes: result.routes };
}

/**
 * The empty layout is recorded (the environment workflow takes the signal a moment later). A
 * migration that committed between the layout read and the take-down's start was not taken down:
 * the signal is then refused, and this says so.
 */
async function confirmEmpty(temporal: TemporalSession, environment: string, before: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const after = await currentLayout(temporal, environment);
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
