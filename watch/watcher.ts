/**
 * `cutover watch`: plans every new commit of a branch that changes a topology file, writes the
 * plan as a report, and with `apply` reconciles: starts a migration pinned to that plan, or, while
 * one is in flight for the environment, keeps the newest pending commit and applies it after.
 *
 * Triggers: a local repository's refs are watched (chokidar), so a commit, merge or fast-forward is
 * seen at once; a remote is fetched into a cache clone on an interval with jitter, and at once when
 * the server drops a webhook trigger for it into `<state>/watch/hooks/`. Bursts are debounced; the branch
 * head is always what gets planned, and a topology whose normalised model did not change (comments,
 * key order, quoting) is not planned again.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { watch as chokidarWatch, type FSWatcher } from 'chokidar';
import picomatch from 'picomatch';
import { CutoverError } from '../core/errors.js';
import { type SavedPlan, savedPlanOf, topologyDigest } from '../core/plan/saved-plan.js';
import { isEmptyPlan } from '../core/plan/types.js';
import { formatDiagnostic } from '../core/topology/diagnostic.js';
import { loadTopology } from '../core/topology/load-topology.js';
import { type HealEvent, type HealTarget, SelfHeal, topologySource } from '../engine/api.js';
import { StateDir, stateDirPath } from '../engine/store/state-dir.js';
import { ApplyQueue, markOutcome, type Pending } from './apply-queue.js';
import { CheckLoop } from './check-loop.js';
import { openRepository, type Repository } from './git.js';
import {
  hooksDir,
  pendingTriggers,
  pruneTriggers,
  readTrigger,
  type Trigger,
  takeTrigger,
  triggerMatcher,
  watchTriggers,
} from './hook-triggers.js';
import { environmentHint, type Report, type ReportContent, summaryOf, writeReport } from './reports.js';
import { WatchServices } from './services.js';

export type { Report } from './reports.js';

export interface WatchOptions {
  /** A local path or a URL (`file://`, `https://`, `ssh://`, `user@host:path`). */
  repo: string;
  branch: string;
  /** Topology files (paths in the repository) or one glob; default `topology.yaml`. */
  files: string[];
  glob?: string;
  /** A remote's fetch interval, and a local repository's safety poll. */
  intervalMs: number;
  apply: boolean;
  /**
   * Reports go to `<outDir>/<environment>/<short-sha>.*`; absent, into the state directory of each
   * file (`<state>/watch/reports/<environment>/`), never the watched working tree.
   */
  outDir?: string;
  /** A state directory for every file; default: `.cutover/` beside each file in a local working tree, else `./.cutover`. */
  stateDir?: string;
  /** Where remote repositories are cloned; default `<state>/watch/cache`. */
  cacheDir?: string;
  log: (line: string) => void;
  /** WORKFLOW_HOST set: plans and migrations go through Temporal, as the CLI's do. Default process.env. */
  env?: NodeJS.ProcessEnv;
  /**
   * `--verbose`: what each check found when it changed nothing (the head unchanged, no topology
   * file changed, the branch still missing), so an operator (or a test) sees the watcher look.
   */
  trace?: (line: string) => void;
  /** Called after each report is written (tests, benchmarks). */
  onReport?: (report: Report) => void;
  /**
   * `--self-heal`: keep every environment this watcher planned as recorded, repairing drift (see
   * engine/heal/self-heal.ts). Absent: no healing.
   */
  selfHeal?: { intervalMs: number; maxRepairsPerHour: number; onEvent?: (event: HealEvent) => void };
}

/** Problems of an invalid topology printed with its log line (all of them are in the report). */
const maxLoggedDiagnostics = 5;

/**
 * The watcher: opens the repository, wires the triggers to checks (check-loop.ts), and at each check
 * plans what changed at the branch head (reports.ts) and hands plans to the apply queue
 * (apply-queue.ts), which starts migrations through the services (services.ts).
 */
export class Watcher {
  private repo: Repository | null = null;
  private lastHead: string | null = null;
  private readonly lastBlob = new Map<string, string>();
  /** Per file, the digest of the normalised model last planned, and its commit: an equal model is not planned again. */
  private readonly lastModel = new Map<string, { digest: string; commit: string }>();
  private branchMissing = false;
  /** `--once`: nothing waits for a migration in flight, the process is about to exit. */
  private onceOnly = false;
  private watchers: FSWatcher[] = [];
  private readonly accept: (file: string) => boolean;
  private readonly services: WatchServices;
  private readonly loop: CheckLoop;
  private readonly queue: ApplyQueue;
  private triggerIsOwn: ((trigger: Trigger) => boolean) | null = null;
  /** Each environment planned, and its state directory and topology file's directory: what self-heal keeps. */
  private readonly planned = new Map<string, { stateDir: string; baseDir: string }>();
  private heal: SelfHeal | null = null;

  constructor(private readonly options: WatchOptions) {
    this.services = new WatchServices(options.env ?? process.env);
    if (options.glob !== undefined) {
      const match = picomatch(options.glob, { dot: true });
      this.accept = (file) => match(file);
    } else {
      const wanted = new Set(options.files.map((f) => path.posix.normalize(f.split(path.sep).join('/'))));
      this.accept = (file) => wanted.has(file);
    }
    this.queue = new ApplyQueue({
      services: this.services,
      repo: () => this.repo as Repository,
      log: (line) => this.options.log(line),
      replan: (item) => this.replan(item),
      onReport: (report) => this.options.onReport?.(report),
      onceOnly: () => this.onceOnly,
      wake: () => this.loop.schedule(0),
    });
    this.loop = new CheckLoop({
      check: () => this.check(),
      fetch: async () => this.repo?.fetch(),
      log: (line) => this.options.log(line),
      afterCheck: () => this.queue.watchPending(),
      intervalMs: options.intervalMs,
    });
  }

  /** The state directory of what belongs to no file (the cache): `--state-dir`, else `./.cutover`. */
  private get defaultStateDir(): string {
    return stateDirPath({ given: this.options.stateDir, env: {}, topologyDir: process.cwd() });
  }

  /** A file's: `--state-dir` (CUTOVER_STATE_DIR is folded into it), else `.cutover/` beside the file in a local work tree. */
  private stateDirOf(file: string): string {
    const workTree = this.repo?.workTree;
    if (!workTree) return this.defaultStateDir;
    return stateDirPath({
      given: this.options.stateDir,
      env: {},
      topologyDir: path.join(workTree, path.dirname(file)),
    });
  }

  /** Plans the head once (`--once`); the reports written. */
  async once(): Promise<Report[]> {
    const reports: Report[] = [];
    const onReport = this.options.onReport;
    this.options.onReport = (r) => {
      reports.push(r);
      onReport?.(r);
    };
    this.onceOnly = true;
    this.repo = await this.open();
    // This repository's triggers there before the fetch are answered by it: taken once the head
    // is checked. Other repositories' are left to their watchers.
    const hooks = hooksDir(this.defaultStateDir);
    const triggers = pendingTriggers(hooks)
      .map(readTrigger)
      .filter((t): t is Trigger => t !== null && this.ownsTrigger(t));
    await this.repo.fetch();
    try {
      await this.check();
    } finally {
      await this.services.close();
    }
    for (const trigger of triggers) takeTrigger(trigger);
    pruneTriggers(hooks);
    if (this.branchMissing) {
      throw new CutoverError(
        'GIT_REF_UNREADABLE',
        `branch ${this.options.branch} does not exist in ${this.options.repo}: nothing to plan${await this.otherBranches()}`,
      );
    }
    return reports;
  }

  /** Starts watching; resolves once the first check of the head is done. */
  async start(): Promise<void> {
    this.repo = await this.open();
    const repo = this.repo;
    this.options.log(
      `watching ${repo.remote ? repo.source : (repo.workTree ?? repo.gitDir)} branch ${this.options.branch} for ${
        this.options.glob ?? this.options.files.join(', ')
      }${repo.remote ? ` (fetch every ${this.options.intervalMs / 1000} s)` : ''}${this.options.apply ? '; applying' : ''}`,
    );
    const hooks = hooksDir(this.defaultStateDir);
    if (repo.remote) {
      await this.loop.fetchAndCheck();
      this.loop.fetchEveryInterval();
      this.watchers.push(await watchTriggers(hooks, (file) => this.onHook(file)));
    } else {
      // Refs are watched before the first look at the head, so that a commit landing meanwhile is
      // not missed (it triggers a check after the first one).
      const refs = chokidarWatch(
        [path.join(repo.gitDir, 'refs', 'heads'), path.join(repo.gitDir, 'packed-refs')],
        { ignoreInitial: true, depth: 20 },
      );
      refs.on('all', () => this.loop.schedule());
      this.watchers.push(refs);
      await new Promise<void>((resolve) => refs.once('ready', () => resolve()));
      await this.loop.runCheck();
      this.loop.checkEveryInterval();
      // Refs are watched already, so a trigger for this repository (a push straight into it) only
      // asks for a look; it is taken all the same. (Not in a ./.cutover this watcher was not told
      // to use.)
      if (this.options.stateDir !== undefined || existsSync(hooks)) {
        this.watchers.push(await watchTriggers(hooks, (file) => this.onHook(file)));
      }
    }
    if (this.options.selfHeal) {
      const { intervalMs, maxRepairsPerHour, onEvent } = this.options.selfHeal;
      this.heal = new SelfHeal({
        targets: () => this.healTargets(),
        intervalMs,
        maxRepairsPerHour,
        log: (line) => this.options.log(line),
        ...(onEvent ? { onEvent } : {}),
      });
      this.heal.start();
    }
  }

  /** The environments this watcher planned, each through the service of its state directory. */
  private async healTargets(): Promise<HealTarget[]> {
    return Promise.all(
      [...this.planned].map(async ([environment, { stateDir, baseDir }]) => ({
        environment,
        service: await this.services.service(stateDir),
        fallbackBaseDir: baseDir,
      })),
    );
  }

  async stop(): Promise<void> {
    await this.heal?.stop();
    this.queue.stop();
    const ended = this.loop.stop(); // no check starts from here on
    await Promise.all(this.watchers.map((w) => w.close()));
    await ended;
    await this.services.close();
  }

  private async open(): Promise<Repository> {
    const cache = this.options.cacheDir ?? StateDir.at(this.defaultStateDir).watchCacheDir();
    return openRepository(this.options.repo, cache);
  }

  /** Is this trigger for this watcher's repository (its remote's URL, or a local one's directories)? */
  private ownsTrigger(trigger: Trigger): boolean {
    if (this.triggerIsOwn === null) {
      const repo = this.repo as Repository;
      this.triggerIsOwn = triggerMatcher(
        repo.remote ? [repo.source] : [repo.workTree, repo.gitDir].filter((d): d is string => d !== null),
      );
    }
    return this.triggerIsOwn(trigger);
  }

  private onHook(file: string): void {
    // Any trigger's arrival is the time to remove the stale ones nobody took.
    pruneTriggers(path.dirname(file));
    const trigger = readTrigger(file);
    if (trigger === null || !this.ownsTrigger(trigger)) return;
    takeTrigger(trigger);
    if (this.repo?.remote) {
      this.options.log(`webhook${trigger.note}: fetching now`);
      void this.loop.fetchAndCheck();
    } else {
      this.options.log(`webhook${trigger.note}: looking now`);
      this.loop.schedule();
    }
  }

  /** `; its branches: master, dev (choose one with --branch)`, or nothing when there are none. */
  private async otherBranches(): Promise<string> {
    const names = await (this.repo as Repository).branches().catch(() => [] as string[]);
    if (names.length === 0) return '';
    const listed = names.length > 10 ? `${names.slice(0, 10).join(', ')}, …` : names.join(', ');
    return `; its branches: ${listed} (choose one with --branch)`;
  }

  /** Looks at the branch head: plans what changed, then applies what waits. */
  private async check(): Promise<void> {
    const repo = this.repo as Repository;
    const branch = this.options.branch;
    const head = await repo.head(branch);
    if (head === null) {
      // (With --once there is no waiting: runOnce reports it.)
      if (!this.branchMissing && !this.onceOnly) {
        this.options.log(
          `branch ${branch} does not exist${this.lastHead ? ' any more (deleted?)' : ''}; waiting for it${await this.otherBranches()}`,
        );
      } else if (this.branchMissing) {
        this.options.trace?.(`branch ${branch} still does not exist`);
      }
      this.branchMissing = true;
      await this.queue.applyPending();
      return;
    }
    const short = head.slice(0, 7);
    if (this.branchMissing) this.options.log(`branch ${branch} is back at ${short}`);
    this.branchMissing = false;
    if (head === this.lastHead) {
      this.options.trace?.(`${short}: ${branch} has not moved; nothing to plan`);
    } else {
      if (this.lastHead !== null && !(await repo.isAncestor(this.lastHead, head))) {
        this.options.log(
          `${branch} moved from ${this.lastHead.slice(0, 7)} to ${short}, not a fast-forward (a force-push?); planning the new head`,
        );
      }
      const files = await repo.files(head, this.accept);
      if (files.length === 0 && this.lastHead === null) {
        this.options.log(
          `no topology file at ${short} matches ${this.options.glob ?? this.options.files.join(', ')}`,
        );
      }
      let planned = 0;
      for (const file of files) {
        const blob = await repo.blob(head, file);
        if (blob === null || this.lastBlob.get(file) === blob) continue;
        this.lastBlob.set(file, blob);
        try {
          if (await this.planFile(head, file, await repo.read(blob))) planned++;
        } catch (error) {
          // Not planned (the check failed and says why): the next look tries this content again.
          this.lastBlob.delete(file);
          throw error;
        }
      }
      if (planned === 0) this.options.trace?.(`${short}: no topology file changed; nothing to plan`);
      this.lastHead = head;
    }
    await this.queue.applyPending();
  }

  /** Plans a commit's file and publishes the plan (and, with --apply, applies it); false: its model was planned already. */
  private async planFile(commit: string, file: string, text: string): Promise<boolean> {
    const short = commit.slice(0, 7);
    const loaded = loadTopology(text, { file: `${file}@${short}` });
    if (!loaded.ok) {
      // Fixed again later, even to the model planned before, it is planned again (and said valid).
      this.lastModel.delete(file);
      const environment = environmentHint(text, file);
      const report = await this.writeReport(commit, file, environment, {
        kind: 'invalid',
        diagnostics: loaded.diagnostics,
      });
      this.options.log(
        `${short} ${file}: invalid, ${loaded.diagnostics.length} problem${loaded.diagnostics.length === 1 ? '' : 's'} (not applied) → ${report.markdown}`,
      );
      // The first few here too: a CI log shows what to fix without opening the report.
      const shown = loaded.diagnostics.slice(0, maxLoggedDiagnostics);
      for (const d of shown) this.options.log(`  ${formatDiagnostic(d)}`);
      const more = loaded.diagnostics.length - shown.length;
      if (more > 0) this.options.log(`  … and ${more} more in the report`);
      this.options.onReport?.(report);
      return true;
    }
    const topology = loaded.topology;
    const environment = topology.metadata.name;
    // Comments, key order, quoting, anchors: none of them is in the normalised model.
    const digest = topologyDigest(topology);
    const last = this.lastModel.get(file);
    if (last?.digest === digest) {
      this.options.log(
        `${short} ${file} (${environment}): unchanged after normalising (same as ${last.commit.slice(0, 7)}); not planned again`,
      );
      return false;
    }
    const stateDir = this.stateDirOf(file);
    this.planned.set(environment, { stateDir, baseDir: path.dirname(this.plannedPath(file, stateDir)) });
    const report = await this.publish({ commit, file, text, stateDir, environment });
    this.lastModel.set(file, { digest, commit });
    const plan = report.saved.plan;
    this.options.log(`${short} ${file} (${environment}): ${summaryOf(plan)} → ${report.markdown}`);
    if (this.options.apply && !isEmptyPlan(plan)) {
      markOutcome(
        report,
        await this.queue.applyOrQueue({ commit, file, text, stateDir, environment, report }),
      );
    }
    this.options.onReport?.(report);
    return true;
  }

  /** Where a file's relative paths resolve when planning: the working tree's copy, else beside the state directory. */
  private plannedPath(file: string, stateDir: string): string {
    return path.join(this.repo?.workTree ?? path.dirname(stateDir), file);
  }

  /**
   * Plans a commit's file against the live layout of its environment and publishes the result as
   * its report: the plan (markdown, JSON) and the saved plan that --apply applies by id.
   */
  private async publish(item: Omit<Pending, 'report'>): Promise<Report & { saved: SavedPlan }> {
    const planned = this.plannedPath(item.file, item.stateDir);
    const live = await this.services.planLive(
      item.stateDir,
      topologySource({ text: item.text, file: planned }),
    );
    const saved = savedPlanOf({
      plan: live.plan,
      plannedAgainst: live.against,
      topology: { file: planned, text: item.text },
      commit: item.commit,
      createdAt: new Date().toISOString(),
    });
    const report = await this.writeReport(item.commit, item.file, item.environment, { kind: 'plan', saved });
    return { ...report, saved };
  }

  /** A waiting commit whose published plan was refused as stale, planned again; null: nothing to change now. */
  private async replan(item: Pending): Promise<Report | null> {
    const report = await this.publish(item);
    const plan = report.saved.plan;
    this.options.log(
      `${item.commit.slice(0, 7)} ${item.file} (${item.environment}): planned again: ${summaryOf(plan)} → ${report.markdown}`,
    );
    return isEmptyPlan(plan) ? null : report;
  }

  private writeReport(
    commit: string,
    file: string,
    environment: string,
    content: ReportContent,
  ): Promise<Report> {
    const dir =
      this.options.outDir === undefined
        ? StateDir.at(this.stateDirOf(file)).watchReportsDir(environment)
        : path.join(this.options.outDir, environment);
    return writeReport({ dir, branch: this.options.branch }, commit, file, environment, content);
  }
}
