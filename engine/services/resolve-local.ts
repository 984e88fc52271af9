/**
 * `cutover topology migration resolve` in local mode: undo steps left for a person are marked
 * resolved (--skip) or run again (--retry) through the journal and the step function, like the
 * verbs. A migration that has ended has no runner, so the event is appended here, under the
 * runner claim (no runner can write the journal meanwhile); a retry then gets a background
 * runner, which replays the journal and runs the steps as undo steps.
 */
import { appendFileSync } from 'node:fs';
import { CutoverError } from '../../core/errors.js';
import { resolveEvent } from '../../core/migration/host-step.js';
import { refuseResolve } from '../../core/migration/resolve-policy.js';
import { step } from '../../core/migration/step.js';
import type { MigrationState } from '../../core/migration/types.js';
import { claimEnvironment, releaseEnvironment } from '../runner/active-claim.js';
import { JournalWriter, readJournal } from '../runner/journal.js';
import { claimRunner, liveRunner, releaseRunner } from '../runner/runner-claim.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import { readCurrentLayout } from '../store/layout-store.js';
import { isFinished, loadState, type MigrationRef } from './migration-records.js';
import { startRunner } from './migrations.js';
import type { ResolveRequest } from './service-types.js';

export async function resolveLocal(
  ref: MigrationRef,
  secrets: ProcessSecrets,
  request: ResolveRequest,
  by?: string,
): Promise<MigrationState> {
  const { stateDir, environment, id } = ref;
  const paths = stateDir.migration(environment, id);
  const state = loadState(stateDir, environment, id);
  const refusal = refuseResolve(state, request.step);
  if (refusal !== null) throw new CutoverError('VERB_REFUSED', refusal);
  const held = claimRunner(paths.runner, { migrationId: id, port: 0, token: '', startedAt: Date.now() });
  if (!held) {
    const other = liveRunner(paths.runner);
    throw new CutoverError(
      'MIGRATION_CONFLICT',
      `${id} is being changed by another process (pid ${other?.process.pid ?? '?'}); try again once it is done`,
    );
  }
  let claimed = false;
  try {
    if (request.how === 'retry') {
      await checkRetryable(ref, state);
      const claim = claimEnvironment(stateDir, environment, id, (other) =>
        isFinished(stateDir, environment, other),
      );
      if (!claim.ok) {
        throw new CutoverError(
          'MIGRATION_CONFLICT',
          `cannot retry the undo steps of ${id}: ${claim.holder ? `${claim.holder.migrationId} is in flight in ${environment}` : `${environment} is being claimed right now`}; retry once it has ended`,
        );
      }
      claimed = true;
    }
    const event = resolveEvent(request.how, Date.now(), request.step, by);
    const writer = JournalWriter.resume(paths.journal, readJournal(paths.journal));
    try {
      writer.append(event);
    } finally {
      writer.close();
    }
    // The log is the runner's; no runner saw this event, so its lines are written here.
    for (const notice of step(state, event).notices) {
      try {
        appendFileSync(paths.log, `${JSON.stringify(notice)}\n`);
      } catch {
        // The log is for people; the journal is the record.
      }
    }
  } catch (error) {
    if (claimed) releaseEnvironment(stateDir, environment, id);
    throw error;
  } finally {
    releaseRunner(paths.runner);
  }
  if (request.how === 'retry') await startRunner(stateDir, environment, id, secrets);
  return loadState(stateDir, environment, id);
}

/**
 * Undo steps act on the environment's routes and slots as they were when this migration ended:
 * after a later commit they could undo someone else's work. Only while the layout is still the
 * one this migration started from.
 */
async function checkRetryable(ref: MigrationRef, state: MigrationState): Promise<void> {
  const layout = await readCurrentLayout(ref.stateDir, ref.environment);
  if (layout.serial !== state.spec.base.serial) {
    throw new CutoverError(
      'VERB_REFUSED',
      `cannot retry the undo steps of ${ref.id}: ${ref.environment} has changed since (layout serial ${state.spec.base.serial} → ${layout.serial}), and they could undo that change; clean up by hand and \`resolve ${ref.id} --skip\``,
    );
  }
}
