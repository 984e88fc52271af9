/**
 * `--apply`: a planned commit starts a migration pinned to the saved plan the watcher published for
 * it (its report's, by plan id and base serial), so what runs is what the report shows or nothing
 * does. While a migration is in flight for its environment, the commit waits, and only the newest
 * waiting commit of an environment is kept; once the environment is free its published plan is
 * applied. A plan refused as stale (the layout moved in between) is said so, planned again at the
 * next look, and that new plan applied. Each started migration is followed to its end, in the
 * background, and its end logged and written into the report.
 */
import path from 'node:path';
import { CutoverError } from '../core/errors.js';
import type { SavedPlan } from '../core/plan/saved-plan.js';
import { shortPlanId, topologySource } from '../engine/api.js';
import { followToEnd } from './follow-migration.js';
import type { Repository } from './git.js';
import { describeOutcome, type Outcome, type Report, writeOutcome } from './reports.js';
import type { WatchServices } from './services.js';
import { exportTreeOnce, pruneTrees, recordTree } from './trees.js';

/** A commit's topology file on its way to a migration. */
export interface Pending {
  commit: string;
  file: string;
  text: string;
  stateDir: string;
  environment: string;
  /** The report published for the commit: its saved plan is what gets applied. */
  report: Report;
  /** Its published plan was refused as stale: plan again before applying. */
  replan?: boolean;
}

export type ApplyOutcome = { migrationId?: string; queued?: boolean; notApplied?: boolean };

export interface ApplyQueueContext {
  services: WatchServices;
  repo: () => Repository;
  log: (line: string) => void;
  /** Plans a commit's file again against the live layout and publishes it (a new report); null: nothing to apply. */
  replan: (item: Pending) => Promise<Report | null>;
  onReport: (report: Report) => void;
  /** `--once`: nothing waits for a migration in flight, the process is about to exit. */
  onceOnly: () => boolean;
  /** Asks the watcher for a check now: an environment a commit waits for is free. */
  wake: () => void;
}

export class ApplyQueue {
  private readonly pending = new Map<string, Pending>();
  private pendingTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** The migrations being followed to their end; aborted when the watcher stops. */
  private readonly following = new Set<AbortController>();

  constructor(private readonly context: ApplyQueueContext) {}

  /** Starts the migration of a commit's published plan, or queues it behind the one in flight. */
  async applyOrQueue(item: Pending): Promise<ApplyOutcome> {
    const { services, log } = this.context;
    const saved = item.report.saved as SavedPlan;
    const active = await services.inFlight(item.stateDir, item.environment);
    if (active !== null) return this.queue(item, active);
    let id: string;
    try {
      id = await this.apply(item, saved);
    } catch (error) {
      if (error instanceof CutoverError && error.code === 'MIGRATION_CONFLICT') {
        return this.queue(item, (error.details as { migrationId?: string } | undefined)?.migrationId ?? '?');
      }
      return this.refused(item, error as Error);
    }
    const waiting = this.pending.get(item.environment);
    const service = await services.service(item.stateDir);
    await pruneTrees(service, item.stateDir, item.environment, [
      item.commit,
      ...(waiting ? [waiting.commit] : []),
    ]).catch((error: unknown) =>
      log(`exported trees of ${item.environment} kept: ${(error as Error).message}`),
    );
    return { migrationId: id };
  }

  /** Applies each environment's newest pending commit once nothing is in flight there. */
  async applyPending(): Promise<void> {
    const { services } = this.context;
    for (const [environment, waiting] of [...this.pending]) {
      if ((await services.inFlight(waiting.stateDir, environment)) !== null) continue;
      this.pending.delete(environment);
      let item = waiting;
      if (waiting.replan) {
        // The layout moved since its plan was published: the new plan is published, then applied.
        const report = await this.context.replan(waiting);
        if (report === null) continue;
        item = { ...waiting, report, replan: false };
      }
      markOutcome(item.report, await this.applyOrQueue(item));
      if (waiting.replan) this.context.onReport(item.report);
    }
  }

  /**
   * While a commit waits for a migration in flight, looks often (a claim file read) whether that
   * migration ended, and then wakes the watcher at once: not at the next fetch or safety poll,
   * minutes away. Called after every check.
   */
  watchPending(): void {
    if (this.pendingTimer || this.stopped || this.pending.size === 0) return;
    const first = this.pending.values().next().value as Pending;
    // How often to look is the service's to say (a claim file read locally, a query in Temporal).
    void this.context.services.service(first.stateDir).then(
      (service) => {
        if (this.pendingTimer || this.stopped) return;
        this.pendingTimer = setTimeout(() => {
          this.pendingTimer = null;
          void this.anyFree().then((free) => {
            if (free) this.context.wake();
            else this.watchPending();
          });
        }, service.lookAgainMs);
      },
      () => undefined,
    );
  }

  stop(): void {
    this.stopped = true;
    if (this.pendingTimer) clearTimeout(this.pendingTimer);
    for (const following of this.following) following.abort();
    this.following.clear();
  }

  private queue(item: Pending, active: string): { queued: true } {
    const { log } = this.context;
    if (this.context.onceOnly()) {
      // Queued in a process that exits now would be dropped without a word: say so (exit 1).
      log(
        `${item.commit.slice(0, 7)} ${item.file} (${item.environment}): not applied: migration ${active} is in flight; --once does not wait (run it again once ${active} ends, or watch without --once)`,
      );
      return { queued: true };
    }
    const replaced = this.pending.get(item.environment);
    this.pending.set(item.environment, item);
    log(
      `${item.commit.slice(0, 7)} ${item.file} (${item.environment}): queued until ${active} ends${
        replaced ? ` (replaces ${replaced.commit.slice(0, 7)})` : ''
      }`,
    );
    return { queued: true };
  }

  private async anyFree(): Promise<boolean> {
    for (const [environment, item] of this.pending) {
      try {
        if ((await this.context.services.inFlight(item.stateDir, environment)) === null) return true;
      } catch (error) {
        this.context.log(`cannot tell whether ${environment} is free: ${(error as Error).message}`);
      }
    }
    return false;
  }

  /**
   * Refused before it started. Stale (the layout moved since the plan was published): said so, and
   * planned again at the next look (unless a newer commit already waits; with --once, run again).
   * Anything else (drift or a secret changed since: PLAN_MISMATCH; an error): logged, not applied.
   */
  private async refused(item: Pending, error: Error): Promise<ApplyOutcome> {
    const prefix = `${item.commit.slice(0, 7)} ${item.file} (${item.environment})`;
    const planId = (item.report.saved as SavedPlan).plan.planId;
    const stale = error instanceof CutoverError && error.code === 'PLAN_STALE';
    await this.record(item.report, { state: 'refused', planId, reason: error.message });
    if (!stale || this.context.onceOnly() || this.stopped) {
      this.context.log(
        `${prefix}: not applied: ${error.message}${stale ? ' (run the watcher again to plan against the new layout)' : ''}`,
      );
      return { notApplied: true };
    }
    this.context.log(`${prefix}: refused: ${error.message}; planning again`);
    if (!this.pending.has(item.environment)) this.pending.set(item.environment, { ...item, replan: true });
    this.context.wake();
    return { queued: true };
  }

  private async apply(item: Pending, saved: SavedPlan): Promise<string> {
    // The migration runs the commit's own tree (scripts, apps), never the working tree.
    const tree = await exportTreeOnce(this.context.repo(), item.stateDir, item.environment, item.commit);
    const file = path.join(tree, item.file);
    const service = await this.context.services.service(item.stateDir);
    // Pinned to the published plan: its id and the serial it was planned against (refused as
    // stale when the layout moved), so that what runs is what the report shows.
    const started = await service.start({
      ...topologySource({ text: saved.topology.text, file }),
      planId: saved.plan.planId,
      baseSerial: saved.baseSerial,
      commit: item.commit,
    });
    if (!started.created) throw new CutoverError('USAGE', 'nothing to change any more');
    const id = started.summary.id;
    await recordTree(item.stateDir, item.environment, id, item.commit);
    this.context.log(
      `${item.commit.slice(0, 7)} ${item.file} (${item.environment}): migration ${id} started, plan ${shortPlanId(saved.plan.planId)}`,
    );
    await this.record(item.report, { state: 'started', planId: saved.plan.planId, migrationId: id });
    // --once exits now: `migration logs --follow` follows it instead.
    if (!this.context.onceOnly()) this.follow(item, id);
    return id;
  }

  /** Follows a started migration to its end in the background; logs the end and writes it into the report. */
  private follow(item: Pending, id: string): void {
    const prefix = `${item.commit.slice(0, 7)} ${item.file} (${item.environment})`;
    const abort = new AbortController();
    this.following.add(abort);
    const run = async () => {
      const service = await this.context.services.service(item.stateDir);
      const outcome = await followToEnd(service, id, abort.signal);
      if (outcome === null) return;
      // Written before it is said, so a reader of the log finds it in the report.
      await this.record(item.report, outcome);
      this.context.log(`${prefix}: migration ${id} ${endWords(outcome)}`);
    };
    void run()
      .catch((error: unknown) =>
        this.context.log(`${prefix}: cannot follow migration ${id}: ${(error as Error).message}`),
      )
      .finally(() => this.following.delete(abort));
  }

  /** Writes an outcome into a report; a report that cannot be written is logged, the watcher goes on. */
  private async record(report: Report, outcome: Outcome): Promise<void> {
    await writeOutcome(report, outcome).catch((error: unknown) =>
      this.context.log(`cannot write the outcome into ${report.markdown}: ${(error as Error).message}`),
    );
  }
}

/** "completed", "failed: health gate …", "rolled back: …": the end of a log line. */
function endWords(outcome: Outcome): string {
  return describeOutcome(outcome).replace(/^Applied as migration `[^`]*`: /, '');
}

/** Records on a report what became of its migration. */
export function markOutcome(report: Report, outcome: ApplyOutcome): void {
  if (outcome.migrationId !== undefined) report.migrationId = outcome.migrationId;
  if (outcome.queued) report.queued = true;
  if (outcome.notApplied) report.notApplied = true;
}
