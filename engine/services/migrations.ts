/**
 * Migrations in the local (in-process) mode: start, find, list, show, operate and follow them.
 * Front ends call these; the state directory is the only shared state, so any terminal can act on
 * any migration, and a migration whose runner died is picked up again by the next command on it.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { CutoverError, environmentFault } from '../../core/errors.js';
import { describeLifecycle } from '../../core/migration/summary.js';
import type { CommitOrigin, LogLine, RolledBackTo } from '../../core/migration/types.js';
import { isFinal, type MigrationState, type Verb, type VerbOptions } from '../../core/migration/types.js';
import { clock, refuseVerb } from '../../core/migration/verb-policy.js';
import { osUserName } from '../../platform/os-user.js';
import { cutoverCliPath } from '../../platform/package-path.js';
import {
  type ActiveClaim,
  claimEnvironment,
  downClaimId,
  readClaim,
  releaseEnvironment,
} from '../runner/active-claim.js';
import { sendVerbToRunner, startControlServer } from '../runner/control.js';
import type { DriverSet } from '../runner/execute-command.js';
import { JournalWriter } from '../runner/journal.js';
import type { LocalRunner, RunnerDeps } from '../runner/local-runner.js';
import { makeDir } from '../runner/make-dir.js';
import { claimRunner, liveRunner, releaseRunner } from '../runner/runner-claim.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import { keptLayouts } from '../store/layout-store.js';
import type { StateDir } from '../store/state-dir.js';
import { type CreateResult, newMigrationId } from './migration-common.js';
import {
  allMigrations,
  findMigration,
  isFinished,
  listMigrations,
  loadState,
  type MigrationRef,
  summarize,
} from './migration-records.js';
import { runnerStartTimeoutMs } from './runner-liveness.js';
import type { TopologySource } from './service-types.js';

export { findMigration, listMigrations, loadState, type MigrationRef, summarize };

// The topology loader, the planner, the runner and the drivers are loaded by the functions that
// use them: an operator's verb (`cutover topology migration rollback`) needs none of them, and a
// CLI starting on a busy machine takes CPU from the traffic it serves.

export interface CreateRequest {
  /** The topology: its text, its name, and where its relative paths resolve. */
  source: TopologySource;
  stateDir: StateDir;
  /** This process's secrets: the plan digests them as `plan` does. */
  secrets: ProcessSecrets;
  /** The reviewed plan's id: refuse anything else. */
  planId?: string;
  /** The serial a saved plan was planned against: refuse as stale when the live layout moved. */
  baseSerial?: number;
  /** Who starts it (default: the OS user) and from which commit (audit). */
  startedBy?: string;
  commit?: string | null;
  commitFrom?: CommitOrigin;
  appliedCommit?: string | null;
  /** `rollback --to`: the recorded layout it goes back to. */
  rolledBackTo?: RolledBackTo;
  /** Components to replace green-blue with no change (`migrate --replace`). */
  replace?: readonly string[];
  /** How many driver calls run at once (`--parallelism`); default: the topology's strategy.parallelism. */
  parallelism?: number;
  now?: number;
}

/**
 * Creates a migration: claims the environment (at most one migration in flight), plans against the
 * layout that is current once the claim is held, checks a pinned plan id, and writes the journal's
 * first event. Nothing runs yet: `hostMigration` (here or in a detached process) drives it.
 * With no change to make, nothing is created.
 */
export async function createMigration(request: CreateRequest): Promise<CreateResult> {
  // A bad CUTOVER_KEEP_LAYOUTS is refused before anything runs, not ignored at the commit.
  keptLayouts();
  const { prepareMigration, migrationSpec } = await import('./prepare-migration.js');
  const { localHome } = await import('./local-home.js');
  const { stateDir, source } = request;
  const id = newMigrationId();
  const hold = (environment: string) => {
    const claim = stateDirWrite(stateDir, `claiming environment ${environment}`, () =>
      holdEnvironment(stateDir, environment, id, (holder) => conflictError(stateDir, environment, holder)),
    );
    return {
      release: () => releaseEnvironment(stateDir, environment, id),
      ...(claim.notice === undefined ? {} : { notice: claim.notice }),
    };
  };
  const prepared = await prepareMigration(request, localHome(stateDir, request.secrets, hold));
  if (!prepared.needed) return { created: false, plan: prepared.plan };
  const spec = migrationSpec(id, prepared, source.baseDir, request, osUserName);
  const paths = stateDir.migration(spec.environment, id);
  try {
    stateDirWrite(stateDir, `creating ${id}`, () => {
      makeDir(paths.dir);
      JournalWriter.create(paths.journal, { type: 'created', at: spec.createdAt, spec }).close();
    });
  } catch (error) {
    prepared.held?.release();
    // A migration whose journal could not be created was never created: leave no trace of it.
    if (!existsSync(paths.journal)) rmSync(paths.dir, { recursive: true, force: true });
    throw error;
  }
  const notice = prepared.held?.notice;
  return notice === undefined ? { created: true, spec } : { created: true, spec, notice };
}

/** A write to the state directory; a refusal of the machine is one line naming the directory. */
function stateDirWrite<T>(stateDir: StateDir, doing: string, write: () => T): T {
  try {
    return write();
  } catch (error) {
    const fault = environmentFault(error);
    if (!fault) throw error;
    // The journal names its own file; a claim's temp file means nothing to anyone: name the directory.
    if (error instanceof CutoverError) throw error;
    throw environmentFault(error, `${doing} in the state directory ${stateDir.root}`);
  }
}

/**
 * Claims the environment for `id` (a migration, or `down`), as one process at a time may hold it,
 * or throws: `held(holder)` when another migration or take-down holds it, MIGRATION_CONFLICT when
 * another process is claiming it at this very moment.
 */
export function holdEnvironment(
  stateDir: StateDir,
  environment: string,
  id: string,
  held: (holder: ActiveClaim) => Error,
): { notice?: string } {
  const claim = claimEnvironment(
    stateDir,
    environment,
    id,
    (other) => isFinished(stateDir, environment, other),
    () => inFlightMigration(stateDir, environment),
  );
  if (claim.ok) return claim;
  if (claim.holder === null) {
    throw new CutoverError(
      'MIGRATION_CONFLICT',
      `environment ${environment} is being claimed by another process right now (${stateDir.activeFile(environment)}); try again`,
    );
  }
  throw held(claim.holder);
}

/** A migration of the environment whose journal says it has not ended (for a damaged claim). */
export function inFlightMigration(stateDir: StateDir, environment: string): string | null {
  for (const ref of allMigrations(stateDir)) {
    if (ref.environment === environment && isFinished(stateDir, environment, ref.id) === false) return ref.id;
  }
  return null;
}

export function conflictError(stateDir: StateDir, environment: string, holder: ActiveClaim): CutoverError {
  const holderId = holder.migrationId;
  if (holderId === downClaimId) {
    return new CutoverError(
      'MIGRATION_CONFLICT',
      `environment ${environment} is being taken down by process ${holder.claimedBy.pid} (cutover topology down); run this again once it has ended`,
    );
  }
  let detail = '';
  try {
    const state = loadState(stateDir, environment, holderId);
    detail = ` (${describeLifecycle(state)}, started ${clock(state.startedAt)})`;
    if (!liveRunner(stateDir.migration(environment, holderId).runner)) {
      detail += `; no process is driving it: \`cutover topology migration resume ${holderId}\` picks it up`;
    }
  } catch {
    // the holder is being created right now
  }
  return new CutoverError(
    'MIGRATION_CONFLICT',
    `environment ${environment} already has a migration in flight: ${holderId}${detail}`,
    { migrationId: holderId },
  );
}

export interface HostedMigration {
  runner: LocalRunner;
  /** Stops driving (the migration stays in flight for another runner to pick up). */
  stop(): Promise<void>;
}

/**
 * Drives a migration in this process: becomes its one runner (refusing if another live process
 * is), opens the control endpoint for other terminals, and replays the journal to go on from where
 * it stands.
 */
export async function hostMigration(
  stateDir: StateDir,
  environment: string,
  id: string,
  drivers: DriverSet,
  secrets: ProcessSecrets,
  onLine?: RunnerDeps['onLine'],
): Promise<HostedMigration> {
  const paths = stateDir.migration(environment, id);
  const { LocalRunner } = await import('../runner/local-runner.js');
  let runner: LocalRunner | undefined;
  const control = await startControlServer(() => runner);
  let record: ReturnType<typeof claimRunner>;
  try {
    record = claimRunner(paths.runner, {
      migrationId: id,
      port: control.port,
      token: control.token,
      startedAt: Date.now(),
    });
  } catch (error) {
    control.server.close();
    throw notStarted(id, error);
  }
  if (!record) {
    control.server.close();
    const other = liveRunner(paths.runner);
    throw new CutoverError(
      'MIGRATION_CONFLICT',
      `${id} is already driven by another process (pid ${other?.process.pid ?? '?'})`,
    );
  }
  const release = () => {
    releaseRunner(paths.runner);
    control.server.close();
  };
  try {
    runner = LocalRunner.recover(
      stateDir,
      environment,
      id,
      onLine ? { stateDir, drivers, secrets, onLine } : { stateDir, drivers, secrets },
    );
  } catch (error) {
    release();
    throw notStarted(id, error);
  }
  runner.done().then(release, release);
  return {
    runner,
    async stop() {
      runner?.detach();
      release();
      await runner?.deliveries(0); // the abandoned deliveries recorded before the process exits
    },
  };
}

/** A runner that could not start for a fault of the machine: the migration waits for `resume`. */
function notStarted(id: string, error: unknown): unknown {
  const fault = environmentFault(error);
  if (!fault) return error;
  return new CutoverError(
    'ENVIRONMENT_FAULT',
    `${id} could not be started, and waits: ${fault.message}; \`cutover topology migration resume ${id}\` starts it`,
  );
}

/**
 * The runner's environment: the caller's, less the credentials it never needs (its drivers'
 * processes inherit it), with the secrets handed to this process (its own edge decided them).
 */
function runnerEnv(env: NodeJS.ProcessEnv, secrets: ProcessSecrets): NodeJS.ProcessEnv {
  const { CUTOVER_TOKENS: _tokens, CUTOVER_TOKEN: _token, CUTOVER_HOOK_SECRET: _secret, ...rest } = env;
  return { ...inheritedEnv(rest), ...secrets.env };
}

/** Starts a detached process that drives a migration, and waits until it answers; its pid. */
export async function spawnRunner(
  stateDir: StateDir,
  environment: string,
  id: string,
  secrets: ProcessSecrets,
): Promise<number> {
  return (await startRunner(stateDir, environment, id, secrets)).child;
}

/** A runner process started: its pid, and the pid of the runner that drives the migration now. */
export interface StartedRunner {
  child: number;
  /** `child` when it became the runner; another pid when another process's runner won the claim; null once the migration ended. */
  driver: number | null;
}

/**
 * Starts a detached process that drives a migration, and waits until some runner drives it (the
 * runner claim lets one process win when several start one at once), or it has ended.
 */
export async function startRunner(
  stateDir: StateDir,
  environment: string,
  id: string,
  secrets: ProcessSecrets,
): Promise<StartedRunner> {
  const paths = stateDir.migration(environment, id);
  const out = openSync(paths.runnerOutput, 'a');
  let child: ReturnType<typeof spawn>;
  try {
    child = spawn(
      process.execPath,
      [
        cutoverCliPath(),
        'internal',
        'run-migration',
        '--state-dir',
        stateDir.root,
        '--environment',
        environment,
        id,
      ],
      {
        detached: true,
        stdio: ['ignore', out, out],
        env: runnerEnv(process.env, secrets),
      },
    );
  } finally {
    // The runner has its own copy: kept open here, a long-lived caller (the server, watch --apply)
    // would hold one file per migration it started, resumed or adopted.
    closeSync(out);
  }
  child.unref();
  const pid = child.pid ?? 0;
  const deadline = Date.now() + runnerStartTimeoutMs;
  while (Date.now() < deadline) {
    const runner = liveRunner(paths.runner);
    if (runner) return { child: pid, driver: runner.process.pid };
    // A short migration can be over (and its runner gone) between two looks: that is a start.
    if (isFinished(stateDir, environment, id)) return { child: pid, driver: null };
    if (child.exitCode !== null) break;
    await sleep(50);
  }
  if (isFinished(stateDir, environment, id)) return { child: pid, driver: null };
  const tail = existsSync(paths.runnerOutput)
    ? readFileSync(paths.runnerOutput, 'utf8').trim().split('\n').slice(-5).join('\n')
    : '';
  throw new CutoverError(
    'RUNNER_UNREACHABLE',
    `the runner for ${id} did not start${tail ? `:\n${tail}` : ''}`,
  );
}

export interface VerbOutcome {
  state: MigrationState;
  /** The migration had no live runner and one was started for it. */
  recovered: boolean;
}

/**
 * Applies an operator verb from any terminal: refused with a sentence where the state does not
 * allow it; otherwise sent to the runner, which journals it before answering. A migration whose
 * runner died gets a new one first (that is also what `resume` does for a running migration).
 */
export async function operate(
  ref: MigrationRef,
  secrets: ProcessSecrets,
  verb: Verb,
  by?: string,
  options: VerbOptions = {},
): Promise<VerbOutcome> {
  const paths = ref.stateDir.migration(ref.environment, ref.id);
  let state = loadState(ref.stateDir, ref.environment, ref.id);
  if (isFinal(state.lifecycle)) throw refused(state, verb);
  let recovered = false;
  let runner = liveRunner(paths.runner);
  if (!runner) {
    await spawnRunner(ref.stateDir, ref.environment, ref.id, secrets);
    runner = liveRunner(paths.runner);
    recovered = true;
    state = loadState(ref.stateDir, ref.environment, ref.id);
    // Picking a running migration up is what resume asks for; a pending pause is withdrawn too.
    // The new runner may already have driven it to its end and exited (the steps left were
    // short): resumed all the same (test/e2e/resume-race.test.ts).
    if (
      verb === 'resume' &&
      (isFinal(state.lifecycle) || (state.lifecycle !== 'paused' && !state.pauseRequested))
    )
      return { state, recovered };
    if (!runner) throw refused(state, verb);
  }
  const result = await sendVerbToRunner(runner, verb, by, options).catch((error: unknown) => {
    // The runner exits once the migration has ended: a verb that reached it as it did (another
    // operator's commit or cancel just ended it) is answered from the journal, like any verb
    // given after the end, not as a runner that does not answer.
    if (error instanceof CutoverError && error.code === 'RUNNER_UNREACHABLE') {
      const now = loadState(ref.stateDir, ref.environment, ref.id);
      if (isFinal(now.lifecycle)) throw refused(now, verb);
    }
    throw error;
  });
  if (!result.ok) throw new CutoverError('VERB_REFUSED', result.refusal);
  return { state: result.state, recovered };
}

function refused(state: MigrationState, verb: Verb): CutoverError {
  return new CutoverError('VERB_REFUSED', refuseVerb(state, verb) ?? `cannot ${verb} ${state.spec.id} now`);
}

/**
 * The log lines of a migration; with `follow`, keeps reading as lines arrive and ends once the
 * migration has ended, once no runner has driven it for two polls (it died: `resume` picks it up),
 * or when `signal` aborts (a reader that went away).
 */
export async function* readLog(
  ref: MigrationRef,
  options: { follow: boolean; pollMs?: number; signal?: AbortSignal },
): AsyncGenerator<LogLine> {
  const paths = ref.stateDir.migration(ref.environment, ref.id);
  const pollMs = options.pollMs ?? 200;
  let offset = 0;
  let pending = '';
  // Reads left: unbounded while following; at the end, this one and one more shortly after, since
  // a runner journals an event before it writes that event's log lines.
  let reads = options.follow ? Number.POSITIVE_INFINITY : 1;
  let unattended = 0;
  for (;;) {
    if (options.signal?.aborted) return;
    if (reads === Number.POSITIVE_INFINITY) {
      if (isFinished(ref.stateDir, ref.environment, ref.id)) reads = 2;
      else if (liveRunner(paths.runner)) unattended = 0;
      else if (++unattended >= 2) reads = 1;
    }
    const size = existsSync(paths.log) ? statSync(paths.log).size : 0;
    if (size > offset) {
      const handle = await open(paths.log, 'r');
      try {
        const buffer = Buffer.alloc(size - offset);
        await handle.read(buffer, 0, buffer.length, offset);
        offset = size;
        pending += buffer.toString('utf8');
      } finally {
        await handle.close();
      }
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (line.trim() === '') continue;
        try {
          yield JSON.parse(line) as LogLine;
        } catch {
          // a line torn by a crash: skip it
        }
      }
    }
    reads -= 1;
    if (reads <= 0) return;
    try {
      const waitMs = reads === 1 ? Math.min(pollMs, 50) : pollMs;
      await sleep(waitMs, undefined, options.signal ? { signal: options.signal } : undefined);
    } catch {
      return; // aborted
    }
  }
}

/** The in-flight migration of an environment, if any (a `down` holding it is none: it has no id to show). */
export function activeMigration(stateDir: StateDir, environment: string): string | null {
  const id = readClaim(stateDir, environment)?.migrationId ?? null;
  return id === downClaimId ? null : id;
}
