/**
 * `--apply`: a planned commit starts a migration pinned to its plan; while a migration is in flight
 * for its environment, the commit waits, and only the newest waiting commit of an environment is
 * kept. Once the environment is free it is planned again (the layout moved on) and applied.
 */
import path from 'node:path';
import { CutoverError } from '../core/errors.js';
import { isEmptyPlan, type Plan } from '../core/plan/types.js';
import { loadTopology } from '../core/topology/load-topology.js';
import type { Repository } from './git.js';
import { type Report, type ReportContent, summaryOf } from './reports.js';
import type { WatchServices } from './services.js';
import { exportTreeOnce, pruneTrees, recordTree } from './trees.js';

/** A commit's topology file on its way to a migration. */
export interface Pending {
  commit: string;
  file: string;
  text: string;
  stateDir: string;
  environment: string;
}

export type ApplyOutcome = { migrationId?: string; queued?: boolean; notApplied?: boolean };

export interface ApplyQueueContext {
  services: WatchServices;
  repo: () => Repository;
  log: (line: string) => void;
  writeReport: (commit: string, file: string, environment: string, content: ReportContent) => Promise<Report>;
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

  constructor(private readonly context: ApplyQueueContext) {}

  /** Starts the migration of a planned commit, or queues it behind the one in flight. */
  async applyOrQueue(item: Pending, plan: Plan): Promise<ApplyOutcome> {
    const { services, log } = this.context;
    const short = item.commit.slice(0, 7);
    const active = await services.inFlight(item.stateDir, item.environment);
    if (active !== null) return this.queue(item, active);
    let id: string;
    try {
      id = await this.apply(item, plan);
    } catch (error) {
      if (error instanceof CutoverError && error.code === 'MIGRATION_CONFLICT') {
        return this.queue(item, (error.details as { migrationId?: string } | undefined)?.migrationId ?? '?');
      }
      log(`${short} ${item.file} (${item.environment}): not applied: ${(error as Error).message}`);
      return { notApplied: true };
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
    const { services, log } = this.context;
    for (const [environment, item] of [...this.pending]) {
      if ((await services.inFlight(item.stateDir, environment)) !== null) continue;
      this.pending.delete(environment);
      const loaded = loadTopology(item.text, { file: `${item.file}@${item.commit.slice(0, 7)}` });
      if (!loaded.ok) continue;
      // The layout moved on with the migration that just ended: plan again, and pin that plan.
      const plan = await services.planAgainstLayout(item.stateDir, loaded.topology);
      const report = await this.context.writeReport(item.commit, item.file, environment, {
        kind: 'plan',
        plan,
      });
      log(
        `${item.commit.slice(0, 7)} ${item.file} (${environment}): re-planned after the migration in flight: ${summaryOf(plan)}`,
      );
      if (!isEmptyPlan(plan)) markOutcome(report, await this.applyOrQueue(item, plan));
      this.context.onReport(report);
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

  private async apply(item: Pending, plan: Plan): Promise<string> {
    // The migration runs the commit's own tree (scripts, apps), never the working tree.
    const tree = await exportTreeOnce(this.context.repo(), item.stateDir, item.environment, item.commit);
    const file = path.join(tree, item.file);
    const service = await this.context.services.service(item.stateDir);
    const started = await service.start({
      file,
      text: item.text,
      baseDir: path.dirname(file),
      planId: plan.planId,
    });
    if (!started.created) throw new CutoverError('USAGE', 'nothing to change any more');
    const id = started.summary.id;
    await recordTree(item.stateDir, item.environment, id, item.commit);
    this.context.log(
      `${item.commit.slice(0, 7)} ${item.file} (${item.environment}): migration ${id} started`,
    );
    return id;
  }
}

/** Records on a report what became of its migration. */
export function markOutcome(report: Report, outcome: ApplyOutcome): void {
  if (outcome.migrationId !== undefined) report.migrationId = outcome.migrationId;
  if (outcome.queued) report.queued = true;
  if (outcome.notApplied) report.notApplied = true;
}
