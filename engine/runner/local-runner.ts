import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { CutoverError, environmentFault } from '../../core/errors.js';
import { carryOut, operatorEvent, pickUp } from '../../core/migration/host-step.js';
import { replay, start, step } from '../../core/migration/step.js';
import {
  type Command,
  isFinal,
  type LogLine,
  type MigrationEvent,
  type MigrationSpec,
  type MigrationState,
  type Transition,
  type Verb,
  type VerbOptions,
} from '../../core/migration/types.js';
import { refuseVerb } from '../../core/migration/verb-policy.js';
import { notificationsOf } from '../../core/notify/migration-events.js';
import type { Redactor } from '../../core/redact.js';
import { superviseRouter } from '../drivers/router-driver.js';
import { Notifier } from '../notify/notifier.js';
import { processRedactor } from '../redact/process-redactor.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import type { MigrationPaths, StateDir } from '../store/state-dir.js';
import { releaseEnvironment } from './active-claim.js';
import { type DriverSet, type ExecuteOptions, executeCommand } from './execute-command.js';
import { JournalWriter, readJournal } from './journal.js';
import { replicationFigureWriter } from './replication-figures.js';
import { processTracker, stopLeftoverProcesses } from './tracked-processes.js';

export interface RunnerDeps {
  stateDir: StateDir;
  drivers: DriverSet;
  /** This process's secrets (decided at its edge): the drivers', hooks' and notifications'. */
  secrets: ProcessSecrets;
  /** Clock for events; tests may pin it. */
  now?: () => number;
  /** Subscribed before the runner starts, so it sees every line. */
  onLine?: (line: LogLine, state: MigrationState) => void;
  /** Masks secrets in every event journaled, line logged and notification sent; default: the secrets of `secrets` (not the process environment: an in-process command hands its own). */
  redact?: Redactor;
}

export type VerbResult =
  | { ok: true; state: MigrationState }
  | { ok: false; refusal: string; state: MigrationState };

/**
 * Drives one migration in this process: journals every event (fsync'd) before acting on it, runs
 * the step function, executes its commands against the drivers, and takes operator verbs. A runner
 * killed at any point is replaced by `LocalRunner.recover`, which replays the journal and goes on.
 */
export class LocalRunner {
  private state: MigrationState;
  private readonly journal: JournalWriter;
  private readonly paths: MigrationPaths;
  private readonly aborts = new Map<string, AbortController>();
  private readonly listeners = new Set<(line: LogLine, state: MigrationState) => void>();
  private readonly finished: Promise<MigrationState>;
  private resolveFinished!: (state: MigrationState) => void;
  private rejectFinished!: (error: unknown) => void;
  private readonly now: () => number;
  private closed = false;
  private readonly trackProcess: (pid: number) => () => void;
  /** Delivers the notifications beside the migration; null when its topology has no targets. */
  private readonly notifier: Notifier | null;
  /** Events in the journal: the sequence number of the last one (1 = created). */
  private seq: number;
  /** Ends the router's supervision when this runner stops driving. */
  private readonly supervision = new AbortController();
  /** Applied at the writers: the journal (after `created`), the log, the notifications. */
  private readonly redact: Redactor;
  /** Keeps the health gate's last measure of each switched component's lag (not the record). */
  private readonly replicationFigure: NonNullable<ExecuteOptions['replicationFigure']>;

  private constructor(
    private readonly deps: RunnerDeps,
    state: MigrationState,
    journal: JournalWriter,
    seq: number,
  ) {
    this.state = state;
    this.journal = journal;
    this.seq = seq;
    this.now = deps.now ?? Date.now;
    this.redact = deps.redact ?? processRedactor(deps.secrets.env);
    this.paths = deps.stateDir.migration(state.spec.environment, state.spec.id);
    this.trackProcess = processTracker(this.paths.processes);
    this.replicationFigure = replicationFigureWriter(this.paths.replication);
    if (deps.onLine) this.listeners.add(deps.onLine);
    const { notify } = state.spec.desired;
    this.notifier =
      notify === undefined || Object.keys(notify).length === 0
        ? null
        : new Notifier({
            targets: notify,
            secrets: deps.secrets.for(state.spec.baseDir),
            baseDir: state.spec.baseDir,
            recordFile: this.paths.notifications,
            redact: this.redact,
            log: (level, message) => this.log({ at: this.now(), level, kind: 'notify', message }),
            now: this.now,
          });
    this.finished = new Promise((resolve, reject) => {
      this.resolveFinished = resolve;
      this.rejectFinished = reject;
    });
    // A router killed during the migration (in a hold, say) is started again at once, not at the
    // next route step or the rollback: clients would be refused all that while.
    void superviseRouter(deps.stateDir, {
      signal: this.supervision.signal,
      log: (message) => this.log({ at: this.now(), level: 'warn', kind: 'driver', message }),
    });
  }

  /** Starts a new migration. The caller has claimed the environment for it. */
  static begin(spec: MigrationSpec, deps: RunnerDeps): LocalRunner {
    const paths = deps.stateDir.migration(spec.environment, spec.id);
    mkdirSync(paths.dir, { recursive: true });
    const event: MigrationEvent = { type: 'created', at: spec.createdAt, spec };
    const journal = JournalWriter.create(paths.journal, event);
    const t = start(spec);
    const runner = new LocalRunner(deps, t.state, journal, 1);
    runner.apply(t);
    runner.notify(null, event);
    return runner;
  }

  /**
   * Picks up a migration whose runner died: replays its journal and re-issues every command that
   * was in flight (drivers are idempotent), or finishes those that were being cancelled.
   */
  static recover(stateDir: StateDir, environment: string, id: string, deps: RunnerDeps): LocalRunner {
    const paths = stateDir.migration(environment, id);
    if (!existsSync(paths.journal))
      throw new CutoverError('MIGRATION_NOT_FOUND', `no journal for migration ${id}`);
    const contents = readJournal(paths.journal);
    const state = replay(contents.events);
    const journal = JournalWriter.resume(paths.journal, contents);
    const runner = new LocalRunner(deps, state, journal, contents.events.length);
    for (const pid of stopLeftoverProcesses(paths.processes)) {
      const message = `stopped process group ${pid}, left running by the previous runner, before running its step again`;
      runner.log({ at: runner.now(), level: 'warn', kind: 'driver', message });
    }
    if (contents.events.length === 1) {
      // Told by the runner that created it, unless that one died first (a foreground migrate
      // interrupted in its first call hands over with the journal at `created`).
      if (!startLogged(paths.log)) for (const notice of start(state.spec).notices) runner.log({ ...notice });
      runner.notify(null, contents.events[0] as MigrationEvent);
    } else if (!isFinal(state.lifecycle)) {
      const message = `runner (pid ${process.pid}) picked the migration up from its journal`;
      runner.log({ at: runner.now(), level: 'warn', kind: 'driver', message });
    }
    if (isFinal(state.lifecycle)) {
      runner.finish();
      return runner;
    }
    pickUp(
      state,
      { issue: (command) => runner.dispatch(command), record: (event) => runner.record(event) },
      runner.now,
    );
    return runner;
  }

  get current(): MigrationState {
    return this.state;
  }

  /** Resolves with the final state once the migration has ended. */
  done(): Promise<MigrationState> {
    return this.finished;
  }

  onLine(listener: (line: LogLine, state: MigrationState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Resolves once the notifications queued have been delivered or given up, or after a grace
   * period that bounds how long a process ending with its migration stays up for them.
   */
  deliveries(graceMs?: number): Promise<void> {
    return this.notifier?.settle(graceMs) ?? Promise.resolve();
  }

  /** Applies an operator verb: refused with a sentence, or journaled (durable) before it returns. */
  verb(verb: Verb, by?: string, options: VerbOptions = {}): VerbResult {
    const refusal = refuseVerb(this.state, verb);
    if (refusal !== null) return { ok: false, refusal, state: this.state };
    this.record(operatorEvent(verb, this.now(), by, options));
    return { ok: true, state: this.state };
  }

  /**
   * Journals an event, then steps the state machine and acts on what it asks. An event that cannot
   * be journaled stops the runner (it is then as if it had crashed there) and is thrown to the caller.
   */
  private record(given: MigrationEvent): void {
    if (this.closed) return;
    // Masked before it is journaled and applied, so the state, its replay and everything derived
    // from it (reasons, notifications, answers) hold what the journal holds. Never `created`,
    // which this does not journal: its topology is what runs.
    const event = this.redact.value(given);
    try {
      this.journal.append(event);
    } catch (error) {
      this.fail(error);
      throw error;
    }
    this.seq++;
    const before = this.state;
    this.apply(step(before, event));
    this.notify(before, event);
  }

  /** Queues the notifications of the event just applied; they never hold the migration up. */
  private notify(before: MigrationState | null, event: MigrationEvent): void {
    if (!this.notifier) return;
    for (const cloudEvent of notificationsOf(before, event, this.state, this.seq))
      this.notifier.publish(cloudEvent);
  }

  /** The host of the step function (core/migration/host-step.ts, shared with the Temporal workflow). */
  private apply(t: Transition): void {
    this.state = t.state;
    carryOut(t, {
      log: (line) => this.log(line),
      cancel: (id) => this.aborts.get(id)?.abort(new CutoverError('CANCELLED', 'cancelled')),
      issue: (command) => this.dispatch(command),
    });
    if (isFinal(this.state.lifecycle)) this.finish();
  }

  private dispatch(command: Command): void {
    const controller = new AbortController();
    this.aborts.set(command.id, controller);
    const log = (message: string) => this.log({ at: this.now(), level: 'info', kind: 'driver', message });
    executeCommand(this.state, command, {
      stateDir: this.deps.stateDir,
      drivers: this.deps.drivers,
      secrets: this.deps.secrets,
      signal: controller.signal,
      log,
      trackProcess: this.trackProcess,
      replicationFigure: this.replicationFigure,
    })
      .then((result) => {
        this.aborts.delete(command.id);
        this.record({ ...result, at: this.now(), commandId: command.id } as MigrationEvent);
      })
      .catch((error: unknown) => this.fail(error));
  }

  private log(given: LogLine): void {
    const line = this.redact.value(given);
    try {
      appendFileSync(this.paths.log, `${JSON.stringify(line)}\n`);
    } catch {
      // The log is for people; the journal is the record. A full disk must not stop a rollback.
    }
    for (const listener of this.listeners) listener(line, this.state);
  }

  /** The migration ended (its last event is journaled): always resolves `done`. */
  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.supervision.abort();
    this.journal.close();
    const { environment, id } = this.state.spec;
    if (!releaseEnvironment(this.deps.stateDir, environment, id)) {
      const file = this.deps.stateDir.activeFile(environment);
      const message = `could not remove ${file}; it is stale now that ${id} has ended, and the next migration replaces it`;
      this.log({ at: this.now(), level: 'warn', kind: 'driver', message });
    }
    this.resolveFinished(this.state);
  }

  /**
   * A bug or a lost disk: stop here; the journal holds everything up to this point, and the
   * migration stays in flight for the next runner. A refusal of the machine is told as one line
   * with what to do.
   */
  private fail(error: unknown): void {
    if (this.closed) return;
    this.closed = true;
    this.supervision.abort();
    for (const controller of this.aborts.values()) controller.abort();
    this.journal.close();
    const fault = environmentFault(error);
    const id = this.state.spec.id;
    this.rejectFinished(
      fault
        ? new CutoverError(
            'ENVIRONMENT_FAULT',
            `${id} stopped, still in flight: ${fault.message}; \`cutover topology migration resume ${id}\` goes on from its journal`,
          )
        : error,
    );
  }

  /** Stops driving without ending the migration (process shutdown); another runner can recover it. */
  detach(): void {
    if (this.closed) return;
    this.closed = true;
    this.supervision.abort();
    for (const controller of this.aborts.values()) controller.abort();
    this.journal.close();
    // A command target runs in its own process group, which the process exiting would not end.
    this.notifier?.abandonAll();
  }
}

/** Whether the migration's log already tells its start (its first line, from the runner that created it). */
function startLogged(logFile: string): boolean {
  try {
    return readFileSync(logFile, 'utf8').includes('"kind":"migration_started"');
  } catch {
    return false; // no log yet
  }
}
