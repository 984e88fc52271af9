/**
 * Starting a migration in Temporal mode: prepared as every mode prepares one (prepareMigration:
 * the layout kept by the environment's workflow, what runs observed by a worker), then started as
 * a workflow under the environment's migration workflow id, whose conflict policy fails a second
 * start while one is in flight.
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { CutoverError } from '../../core/errors.js';
import type { MigrationSpec } from '../../core/migration/types.js';
import { osUserName } from '../../platform/os-user.js';
import { type CreateResult, newMigrationId } from '../services/migration-common.js';
import {
  type MigrationHome,
  migrationSpec,
  type PlanSecrets,
  prepareMigration,
} from '../services/prepare-migration.js';
import type { StartRequest } from '../services/service-types.js';
import { keptLayouts } from '../store/layout-store.js';
import { environmentWorkflow } from './environment-workflow.js';
import { migrationWorkflow } from './migration-workflow.js';
import { storedSize } from './payload-codec.js';
import { currentLayout, layoutAt, observe } from './temporal-layouts.js';
import type { TemporalSession } from './temporal-session.js';
import { conflict } from './temporal-visibility.js';
import {
  environmentWorkflowId,
  hostQueue,
  keepLayoutsSignal,
  migrationWorkflowId,
} from './workflow-definitions.js';

export interface TemporalCreateRequest extends Omit<StartRequest, 'attach'> {
  now?: number;
  /**
   * This process's secrets and the state directory whose key hashes them for the plan: given, a
   * changed secret is seen; the worker records its digests with the key of its own state directory.
   */
  secrets?: PlanSecrets;
}

/** Temporal's `MigrationHome`: layouts kept by the environment's workflow, observed by a worker. */
export function temporalHome(temporal: TemporalSession, secrets?: PlanSecrets): MigrationHome {
  return {
    layout: (environment) => currentLayout(temporal, environment),
    // Only to tell a stale pinned plan: an earlier layout that cannot be read is one not kept.
    layoutAt: (environment, serial) => layoutAt(temporal, environment, serial).catch(() => null),
    observe: (layout, baseDir) => observe(temporal, layout, baseDir),
    absentHosts: (hosts) => temporal.absentHosts(hosts),
    ...(secrets === undefined ? {} : { secrets }),
  };
}

export async function create(
  temporal: TemporalSession,
  request: TemporalCreateRequest,
): Promise<CreateResult> {
  // Read here, where the environment is (the workflow cannot), and a bad value refused before anything runs.
  const keep = keptLayouts();
  const prepared = await prepareMigration(
    { ...request, source: { text: request.text, file: request.file, baseDir: request.baseDir } },
    temporalHome(temporal, request.secrets),
  );
  if (!prepared.needed) return { created: false, plan: prepared.plan };
  const absent = prepared.absentHosts ?? [];
  if (absent.length > 0 && request.allowAbsentHosts !== true) {
    prepared.held?.release();
    throw new CutoverError('RUNNER_UNREACHABLE', absentHostsRefusal(temporal, absent));
  }
  const spec = migrationSpec(newMigrationId(), prepared, request.baseDir, request, osUserName);
  const { environment } = spec;
  await refuseOversizedSpec(spec);
  const { taskQueue } = temporal.settings;
  await temporal.call('to start the environment workflow', () =>
    temporal.client.workflow.signalWithStart(environmentWorkflow, {
      workflowId: environmentWorkflowId(environment),
      taskQueue,
      args: [{ environment, keep }],
      signal: keepLayoutsSignal,
      signalArgs: [keep],
      workflowIdConflictPolicy: 'USE_EXISTING',
    }),
  );
  try {
    await temporal.call('to start the migration', () =>
      temporal.client.workflow.start(migrationWorkflow, {
        workflowId: migrationWorkflowId(environment),
        taskQueue,
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
    if (error instanceof WorkflowExecutionAlreadyStartedError) throw await conflict(temporal, environment);
    throw error;
  }
  return { created: true, spec };
}

/** What `migrate` says of a topology naming hosts no worker polls. */
function absentHostsRefusal(temporal: TemporalSession, hosts: readonly string[]): string {
  const named = hosts.map((h) => `host ${h}`).join(', ');
  const queues = hosts.map((h) => `"${hostQueue(temporal.settings.taskQueue, h)}"`).join(', ');
  return `no cutover worker polls ${named} (task queue ${queues} at WORKFLOW_HOST=${temporal.settings.address}): start \`cutover worker --host ${hosts[0]}\` on that machine, with the same TEMPORAL_TASK_QUEUE, or pass --allow-absent-hosts (through the API: allowAbsentHosts: true) to start the migration anyway (its calls there wait for the worker, at most strategy.hostWait)`;
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
