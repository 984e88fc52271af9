/**
 * The local mode's record of migrations, read from the state directory: find one by id or prefix,
 * replay its journal, summarize it, list them all. Reading only: nothing here starts or changes a
 * migration (migrations.ts does).
 */
import { existsSync, readdirSync } from 'node:fs';
import { decodeTime } from 'ulid';
import { CutoverError } from '../../core/errors.js';
import { replay } from '../../core/migration/step.js';
import { type MigrationSummary, summaryOf } from '../../core/migration/summary.js';
import { isFinal, type MigrationState } from '../../core/migration/types.js';
import { readJournal } from '../runner/journal.js';
import { readReplicationFigures } from '../runner/replication-figures.js';
import type { StateDir } from '../store/state-dir.js';
import { runnerSeen } from './runner-liveness.js';

export interface MigrationRef {
  stateDir: StateDir;
  environment: string;
  id: string;
}

/** Finds a migration by id or unique prefix (with or without `mig_`), in any environment. */
export function findMigration(stateDir: StateDir, prefix: string): MigrationRef {
  const wanted = (prefix.startsWith('mig_') ? prefix : `mig_${prefix}`).toLowerCase();
  const matches = allMigrations(stateDir).filter((m) => m.id.startsWith(wanted));
  if (matches.length === 1) return matches[0] as MigrationRef;
  if (matches.length === 0) {
    throw new CutoverError(
      'MIGRATION_NOT_FOUND',
      `no migration ${prefix} in ${stateDir.root} (see \`cutover topology migration list --all\`)`,
    );
  }
  const ids = matches.map((m) => m.id).slice(0, 5);
  throw new CutoverError(
    'MIGRATION_AMBIGUOUS',
    `${prefix} matches ${matches.length} migrations: ${ids.join(', ')}${matches.length > 5 ? ', …' : ''}`,
  );
}

export function allMigrations(stateDir: StateDir): MigrationRef[] {
  const envRoot = stateDir.environmentsDir();
  if (!existsSync(envRoot)) return [];
  const out: MigrationRef[] = [];
  for (const environment of readdirSync(envRoot)) {
    const dir = stateDir.migrationsDir(environment);
    if (!existsSync(dir)) continue;
    for (const id of readdirSync(dir)) {
      if (existsSync(stateDir.migration(environment, id).journal)) out.push({ stateDir, environment, id });
    }
  }
  return out;
}

export function loadState(stateDir: StateDir, environment: string, id: string): MigrationState {
  return replay(readJournal(stateDir.migration(environment, id).journal).events);
}

/** Whether a migration's journal says it ended; null when the journal cannot be read. */
export function isFinished(stateDir: StateDir, environment: string, id: string): boolean | null {
  try {
    return isFinal(loadState(stateDir, environment, id).lifecycle);
  } catch {
    return null;
  }
}

/** `reachAgain`: the options that reach this state directory, for the command that resumes a dead runner's migration. */
export function summarize(ref: MigrationRef, state: MigrationState, reachAgain = ''): MigrationSummary {
  const summary = summaryOf(state, runnerSeen(ref.stateDir, state, reachAgain));
  if (isFinal(state.lifecycle) || (state.spec.switched ?? []).length === 0) return summary;
  // The live figures of the health gate's lag checks, beside the journal (not the record).
  const figures = readReplicationFigures(ref.stateDir.migration(ref.environment, ref.id).replication);
  return figures.length === 0 ? summary : { ...summary, replication: figures };
}

function unreadableSummary(ref: MigrationRef, problem: string): MigrationSummary {
  return {
    id: ref.id,
    environment: ref.environment,
    lifecycle: 'failed',
    status: 'unreadable',
    planId: '',
    startedBy: null,
    commit: null,
    commitFrom: null,
    appliedCommit: null,
    actionsDone: 0,
    actionsTotal: 0,
    startedAt: decodeTime(ref.id.slice('mig_'.length).toUpperCase()),
    updatedAt: 0,
    committedAt: null,
    endedAt: null,
    reason: problem,
    runnerPid: null,
    runner: 'none',
    unreadable: problem,
  };
}

/** In-flight migrations first, then history, newest first. */
export function listMigrations(
  stateDir: StateDir,
  options: { environment?: string; all?: boolean; reachAgain?: string },
): MigrationSummary[] {
  const refs = allMigrations(stateDir).filter(
    (m) => options.environment === undefined || m.environment === options.environment,
  );
  const summaries = refs.map((ref) => {
    try {
      return summarize(ref, loadState(ref.stateDir, ref.environment, ref.id), options.reachAgain);
    } catch (error) {
      // One damaged journal must not hide every other migration.
      if (!(error instanceof CutoverError) || error.code !== 'STATE_CORRUPT') throw error;
      return unreadableSummary(ref, error.message);
    }
  });
  const inFlight = summaries.filter((s) => !isFinal(s.lifecycle));
  const history = summaries.filter((s) => isFinal(s.lifecycle));
  const newestFirst = (a: MigrationSummary, b: MigrationSummary) => (a.id < b.id ? 1 : -1);
  return [
    ...inFlight.sort(newestFirst),
    ...(options.all ? history.sort(newestFirst) : history.sort(newestFirst).slice(0, 10)),
  ];
}
