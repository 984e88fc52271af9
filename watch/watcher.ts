/**
 * `cutover watch`: plans every new commit of a branch that changes a topology file, writes the
 * plan as a report, and with `apply` reconciles: starts a migration pinned to that plan, or, while
 * one is in flight for the environment, keeps the newest pending commit and applies it after.
 *
 * Triggers: a local repository's refs are watched (chokidar), so a commit, merge or fast-forward is
 * seen at once; a remote is fetched into a cache clone on an interval with jitter, and at once when
 * the server drops a webhook trigger for it into `<state>/watch/hooks/`. Bursts are debounced; the branch
 * head is always what gets planned, and a topology whose content did not change is not planned again.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { watch as chokidarWatch, type FSWatcher } from 'chokidar';
import picomatch from 'picomatch';
import { CutoverError } from '../core/errors.js';
import type { SlotInfo } from '../core/layout.js';
import { buildPlan } from '../core/plan/build-plan.js';
import { isEmptyPlan, type Plan } from '../core/plan/types.js';
import { type Diagnostic, formatDiagnostic } from '../core/topology/diagnostic.js';
import { loadTopology } from '../core/topology/load-topology.js';
import { parseYaml } from '../core/topology/parse-yaml.js';
import type { Topology } from '../core/topology/types.js';
import { type MigrationService, openEngineService } from '../engine/services/migration-service.js';
import { StateDir } from '../engine/store/state-dir.js';
import { renderPlanJson } from '../views/render-plan-json.js';
import { renderPlanMarkdown } from '../views/render-plan-markdown.js';
import { countsLine } from '../views/symbols.js';
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
  /** Reports go to `<outDir>/<environment>/<short-sha>.plan.md|.plan.json`. */
  outDir: string;
  /** A state directory for every file; default: `.cutover/` beside each file in a local working tree, else `./.cutover`. */
  stateDir?: string;
  /** Where remote repositories are cloned; default `<state>/watch/cache`. */
  cacheDir?: string;
  log: (line: string) => void;
  /** WORKFLOW_HOST set: plans and migrations go through Temporal, as the CLI's do. Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Called after each report is written (tests, benchmarks). */
  onReport?: (report: Report) => void;
}

export interface Report {
  commit: string;
  file: string;
  environment: string;
  kind: 'plan' | 'invalid';
  plan?: Plan;
  diagnostics?: Diagnostic[];
  markdown: string;
  json: string;
  /** The migration started for it, if any. */
  migrationId?: string;
  /** Waiting for the migration in flight for its environment. */
  queued?: boolean;
  /** --apply could not start its migration (the reason is in the log). */
  notApplied?: boolean;
}

interface Pending {
  commit: string;
  file: string;
  text: string;
  stateDir: string;
  environment: string;
}

const debounceMs = 60;
/** Problems of an invalid topology printed with its log line (all of them are in the report). */
const maxLoggedDiagnostics = 5;

export class Watcher {
  private repo: Repository | null = null;
  private lastHead: string | null = null;
  private readonly lastBlob = new Map<string, string>();
  private branchMissing = false;
  /** `--once`: nothing waits for a migration in flight, the process is about to exit. */
  private onceOnly = false;
  private running: Promise<void> | null = null;
  private again = false;
  private fetching: Promise<void> | null = null;
  private fetchAgain = false;
  private pendingTimer: NodeJS.Timeout | null = null;
  private debounce: NodeJS.Timeout | null = null;
  private timer: NodeJS.Timeout | null = null;
  private watchers: FSWatcher[] = [];
  private readonly pending = new Map<string, Pending>();
  private stopped = false;
  private readonly accept: (file: string) => boolean;
  /** By state directory, opened at the first use. */
  private readonly services = new Map<string, Promise<MigrationService>>();
  private triggerIsOwn: ((trigger: Trigger) => boolean) | null = null;

  constructor(private readonly options: WatchOptions) {
    if (options.glob !== undefined) {
      const match = picomatch(options.glob, { dot: true });
      this.accept = (file) => match(file);
    } else {
      const wanted = new Set(options.files.map((f) => path.posix.normalize(f.split(path.sep).join('/'))));
      this.accept = (file) => wanted.has(file);
    }
  }

  private get defaultStateDir(): string {
    return path.resolve(this.options.stateDir ?? '.cutover');
  }

  private stateDirOf(file: string): string {
    if (this.options.stateDir !== undefined) return path.resolve(this.options.stateDir);
    const workTree = this.repo?.workTree;
    if (workTree) return path.join(workTree, path.dirname(file), '.cutover');
    return this.defaultStateDir;
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
      await this.closeService();
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
      await this.fetchAndCheck();
      this.scheduleFetch();
      this.watchers.push(await watchTriggers(hooks, (file) => this.onHook(file)));
    } else {
      // Refs are watched before the first look at the head, so that a commit landing meanwhile is
      // not missed (it triggers a check after the first one).
      const refs = chokidarWatch(
        [path.join(repo.gitDir, 'refs', 'heads'), path.join(repo.gitDir, 'packed-refs')],
        { ignoreInitial: true, depth: 20 },
      );
      refs.on('all', () => this.schedule());
      this.watchers.push(refs);
      await new Promise<void>((resolve) => refs.once('ready', () => resolve()));
      await this.runCheck();
      // A safety net for events a file system may drop.
      this.timer = setInterval(() => this.schedule(), this.options.intervalMs);
      // Refs are watched already, so a trigger for this repository (a push straight into it) only
      // asks for a look; it is taken all the same. (Not in a ./.cutover this watcher was not told
      // to use.)
      if (this.options.stateDir !== undefined || existsSync(hooks)) {
        this.watchers.push(await watchTriggers(hooks, (file) => this.onHook(file)));
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.debounce) clearTimeout(this.debounce);
    if (this.pendingTimer) clearTimeout(this.pendingTimer);
    if (this.timer) {
      clearInterval(this.timer);
      clearTimeout(this.timer);
    }
    await Promise.all(this.watchers.map((w) => w.close()));
    await this.fetching;
    await this.running;
    await this.closeService();
  }

  /**
   * Where plans and migrations of a file go, as the engine decides (Temporal when WORKFLOW_HOST is
   * set, else the file's state directory). A failed connection is tried again at the next use.
   */
  private service(stateDir: string): Promise<MigrationService> {
    let service = this.services.get(stateDir);
    if (!service) {
      service = openEngineService({ stateDir: StateDir.at(stateDir), env: this.options.env ?? process.env });
      this.services.set(stateDir, service);
    }
    return service;
  }

  private async closeService(): Promise<void> {
    const services = [...this.services.values()];
    this.services.clear();
    await Promise.all(services.map((s) => s.then((service) => service.close()).catch(() => undefined)));
  }

  /** The migration (or take-down) in flight for an environment, if any. */
  private async inFlight(stateDir: string, environment: string): Promise<string | null> {
    return (await this.service(stateDir)).inFlight(environment);
  }

  private async planAgainstLayout(stateDir: string, topology: Topology): Promise<Plan> {
    const service = await this.service(stateDir);
    return buildPlan(await service.currentLayout(topology.metadata.name), topology);
  }

  private async open(): Promise<Repository> {
    const cache = this.options.cacheDir ?? StateDir.at(this.defaultStateDir).watchCacheDir();
    return openRepository(this.options.repo, cache);
  }

  private scheduleFetch(): void {
    if (this.stopped) return;
    // ±10 % jitter, so that many watchers of one remote do not fetch in step.
    const delay = this.options.intervalMs * (0.9 + Math.random() * 0.2);
    this.timer = setTimeout(() => {
      void this.fetchAndCheck().finally(() => this.scheduleFetch());
    }, delay);
  }

  /**
   * Fetches, then checks the head. One fetch at a time: two `git fetch` into one cache would fight
   * over its ref locks (and the loser's push would wait for the next interval); a trigger that
   * comes during a fetch runs one more after it.
   */
  private fetchAndCheck(): Promise<void> {
    if (this.fetching) {
      this.fetchAgain = true;
      return this.fetching;
    }
    this.fetching = (async () => {
      do {
        this.fetchAgain = false;
        try {
          await this.repo?.fetch();
        } catch (error) {
          this.options.log(
            `fetch failed: ${(error as Error).message}; retrying in ${this.options.intervalMs / 1000} s`,
          );
          continue;
        }
        await this.runCheck();
      } while (this.fetchAgain && !this.stopped);
    })().finally(() => {
      this.fetching = null;
    });
    return this.fetching;
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
      void this.fetchAndCheck();
    } else {
      this.options.log(`webhook${trigger.note}: looking now`);
      this.schedule();
    }
  }

  /** Coalesces triggers; checks run one at a time, and once more if a trigger came meanwhile. */
  private schedule(delay = debounceMs): void {
    if (this.stopped) return;
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => {
      this.debounce = null;
      void this.runCheck();
    }, delay);
  }

  /** Runs a check now; when one is running, runs one more after it, and resolves when the running one ends. */
  private runCheck(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.check()
      .catch((error: unknown) => this.options.log(`check failed: ${(error as Error).message}`))
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.schedule(0);
        } else {
          this.watchPending();
        }
      });
    return this.running;
  }

  /**
   * While a commit waits for a migration in flight, looks often (a claim file read) whether that
   * migration ended, and then checks at once: not at the next fetch or safety poll, minutes away.
   */
  private watchPending(): void {
    if (this.pendingTimer || this.stopped || this.pending.size === 0) return;
    const first = this.pending.values().next().value as Pending;
    void this.service(first.stateDir).then(
      (service) => {
        if (this.pendingTimer || this.stopped) return;
        this.pendingTimer = setTimeout(() => {
          this.pendingTimer = null;
          void this.anyFree().then((free) => {
            if (free) this.schedule(0);
            else this.watchPending();
          });
        }, service.lookAgainMs);
      },
      () => undefined,
    );
  }

  /**
   * Removes the exported trees of an environment that nothing needs any more. Kept: the tree of
   * the live layout (its blue slots are drained and retired with its scripts), those of a migration
   * in flight (its desired and its base), that of a commit waiting to be applied, `started`'s (a
   * migration just started, which a runner may not have claimed yet), the tree of every migration
   * whose slot is still live (a component no later migration replaced still runs from it), and
   * any tree this watcher has no record of.
   */
  private async pruneTrees(stateDir: string, environment: string, started: string): Promise<void> {
    const dir = treesOf(stateDir, environment);
    const entries = readdirSync(dir).filter((entry) => entry !== treeIndexFile);
    const index = readTreeIndex(dir);
    const keep = new Set<string>([started]);
    const keepDir = (baseDir: string | undefined) => {
      const relative = baseDir === undefined ? '' : path.relative(dir, baseDir);
      if (relative && !relative.startsWith('..') && !path.isAbsolute(relative))
        keep.add(relative.split(path.sep)[0] as string);
    };
    const service = await this.service(stateDir);
    const layout = await service.currentLayout(environment);
    keepDir(layout.baseDir);
    const active = await this.inFlight(stateDir, environment);
    if (active !== null) {
      const { state } = await service.show(active);
      keepDir(state.spec.baseDir);
      keepDir(state.spec.base.baseDir);
    }
    const waiting = this.pending.get(environment);
    if (waiting) keep.add(waiting.commit);
    const live = new Set(Object.values(layout.slots ?? {}).map(slotKey));
    const removed: string[] = [];
    for (const entry of entries) {
      if (keep.has(entry)) continue;
      const ids = Object.keys(index).filter((id) => index[id] === entry);
      if (ids.length === 0) continue; // not exported by a migration this watcher recorded
      let needed = false;
      for (const id of ids) {
        const { state } = await service.show(id);
        needed = Object.values(state.slots).some(
          (pair) => pair.green !== undefined && live.has(slotKey(pair.green)),
        );
        if (needed) break;
      }
      if (needed) continue;
      rmSync(path.join(dir, entry), { recursive: true, force: true });
      removed.push(entry);
    }
    if (removed.length > 0) {
      for (const id of Object.keys(index)) if (removed.includes(index[id] as string)) delete index[id];
      await writeAtomic(path.join(dir, treeIndexFile), `${JSON.stringify(index, null, 2)}\n`);
    }
  }

  private async anyFree(): Promise<boolean> {
    for (const [environment, item] of this.pending) {
      try {
        if ((await this.inFlight(item.stateDir, environment)) === null) return true;
      } catch (error) {
        this.options.log(`cannot tell whether ${environment} is free: ${(error as Error).message}`);
      }
    }
    return false;
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
    const head = await repo.head(this.options.branch);
    if (head === null) {
      // (With --once there is no waiting: runOnce reports it.)
      if (!this.branchMissing && !this.onceOnly) {
        this.options.log(
          `branch ${this.options.branch} does not exist${this.lastHead ? ' any more (deleted?)' : ''}; waiting for it${await this.otherBranches()}`,
        );
      }
      this.branchMissing = true;
      await this.applyPending();
      return;
    }
    if (this.branchMissing) this.options.log(`branch ${this.options.branch} is back at ${head.slice(0, 7)}`);
    this.branchMissing = false;
    if (head !== this.lastHead) {
      if (this.lastHead !== null && !(await repo.isAncestor(this.lastHead, head))) {
        this.options.log(
          `${this.options.branch} moved from ${this.lastHead.slice(0, 7)} to ${head.slice(0, 7)}, not a fast-forward (a force-push?); planning the new head`,
        );
      }
      const files = await repo.files(head, this.accept);
      if (files.length === 0 && this.lastHead === null) {
        this.options.log(
          `no topology file at ${head.slice(0, 7)} matches ${this.options.glob ?? this.options.files.join(', ')}`,
        );
      }
      for (const file of files) {
        const blob = await repo.blob(head, file);
        if (blob === null || this.lastBlob.get(file) === blob) continue;
        this.lastBlob.set(file, blob);
        await this.planFile(head, file, await repo.read(blob));
      }
      this.lastHead = head;
    }
    await this.applyPending();
  }

  private async planFile(commit: string, file: string, text: string): Promise<void> {
    const short = commit.slice(0, 7);
    const loaded = loadTopology(text, { file: `${file}@${short}` });
    if (!loaded.ok) {
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
      return;
    }
    const topology = loaded.topology;
    const environment = topology.metadata.name;
    const stateDir = this.stateDirOf(file);
    const plan = await this.planAgainstLayout(stateDir, topology);
    const report = await this.writeReport(commit, file, environment, { kind: 'plan', plan });
    this.options.log(`${short} ${file} (${environment}): ${summaryOf(plan)} → ${report.markdown}`);
    if (this.options.apply && !isEmptyPlan(plan)) {
      const outcome = await this.applyOrQueue({ commit, file, text, stateDir, environment }, plan);
      if (outcome.migrationId !== undefined) report.migrationId = outcome.migrationId;
      if (outcome.queued) report.queued = true;
      if (outcome.notApplied) report.notApplied = true;
    }
    this.options.onReport?.(report);
  }

  private async applyOrQueue(
    item: Pending,
    plan: Plan,
  ): Promise<{ migrationId?: string; queued?: boolean; notApplied?: boolean }> {
    const short = item.commit.slice(0, 7);
    const active = await this.inFlight(item.stateDir, item.environment);
    if (active !== null) return this.queue(item, active);
    let id: string;
    try {
      id = await this.apply(item, plan);
    } catch (error) {
      if (error instanceof CutoverError && error.code === 'MIGRATION_CONFLICT') {
        return this.queue(item, (error.details as { migrationId?: string } | undefined)?.migrationId ?? '?');
      }
      this.options.log(
        `${short} ${item.file} (${item.environment}): not applied: ${(error as Error).message}`,
      );
      return { notApplied: true };
    }
    await this.pruneTrees(item.stateDir, item.environment, item.commit).catch((error: unknown) =>
      this.options.log(`exported trees of ${item.environment} kept: ${(error as Error).message}`),
    );
    return { migrationId: id };
  }

  private queue(item: Pending, active: string): { queued: true } {
    if (this.onceOnly) {
      // Queued in a process that exits now would be dropped without a word: say so (exit 1).
      this.options.log(
        `${item.commit.slice(0, 7)} ${item.file} (${item.environment}): not applied: migration ${active} is in flight; --once does not wait (run it again once ${active} ends, or watch without --once)`,
      );
      return { queued: true };
    }
    const replaced = this.pending.get(item.environment);
    this.pending.set(item.environment, item);
    this.options.log(
      `${item.commit.slice(0, 7)} ${item.file} (${item.environment}): queued until ${active} ends${
        replaced ? ` (replaces ${replaced.commit.slice(0, 7)})` : ''
      }`,
    );
    return { queued: true };
  }

  /** Applies each environment's newest pending commit once nothing is in flight there. */
  private async applyPending(): Promise<void> {
    for (const [environment, item] of [...this.pending]) {
      if ((await this.inFlight(item.stateDir, environment)) !== null) continue;
      this.pending.delete(environment);
      const loaded = loadTopology(item.text, { file: `${item.file}@${item.commit.slice(0, 7)}` });
      if (!loaded.ok) continue;
      // The layout moved on with the migration that just ended: plan again, and pin that plan.
      const plan = await this.planAgainstLayout(item.stateDir, loaded.topology);
      const report = await this.writeReport(item.commit, item.file, environment, { kind: 'plan', plan });
      this.options.log(
        `${item.commit.slice(0, 7)} ${item.file} (${environment}): re-planned after the migration in flight: ${summaryOf(plan)}`,
      );
      if (!isEmptyPlan(plan)) {
        const outcome = await this.applyOrQueue(item, plan);
        if (outcome.migrationId !== undefined) report.migrationId = outcome.migrationId;
        if (outcome.queued) report.queued = true;
        if (outcome.notApplied) report.notApplied = true;
      }
      this.options.onReport?.(report);
    }
  }

  private async apply(item: Pending, plan: Plan): Promise<string> {
    const repo = this.repo as Repository;
    // The migration runs the commit's own tree (scripts, apps), never the working tree.
    const tree = path.join(treesOf(item.stateDir, item.environment), item.commit);
    if (!existsDir(tree)) await repo.exportTree(item.commit, tree);
    const file = path.join(tree, item.file);
    const service = await this.service(item.stateDir);
    const started = await service.start({
      file,
      text: item.text,
      baseDir: path.dirname(file),
      planId: plan.planId,
    });
    if (!started.created) throw new CutoverError('USAGE', 'nothing to change any more');
    const id = started.summary.id;
    await recordTree(treesOf(item.stateDir, item.environment), id, item.commit);
    this.options.log(
      `${item.commit.slice(0, 7)} ${item.file} (${item.environment}): migration ${id} started`,
    );
    return id;
  }

  private async writeReport(
    commit: string,
    file: string,
    environment: string,
    content: { kind: 'plan'; plan: Plan } | { kind: 'invalid'; diagnostics: Diagnostic[] },
  ): Promise<Report> {
    const dir = path.join(path.resolve(this.options.outDir), environment);
    mkdirSync(dir, { recursive: true });
    const short = commit.slice(0, 7);
    const base = path.join(dir, `${short}.plan`);
    const where = `Commit \`${short}\` of \`${this.options.branch}\`, \`${file}\`.`;
    let markdown: string;
    let json: string;
    if (content.kind === 'plan') {
      markdown = `${renderPlanMarkdown(content.plan).trimEnd()}\n\n${where}\n`;
      json = renderPlanJson(content.plan);
    } else {
      const lines = content.diagnostics.map(formatDiagnostic).join('\n');
      markdown = `### cutover: \`${file}\` is invalid at \`${short}\`\n\n${content.diagnostics.length} problem${content.diagnostics.length === 1 ? '' : 's'}; nothing was planned or applied.\n\n\`\`\`\n${lines}\n\`\`\`\n\n${where}\n`;
      json = `${JSON.stringify({ commit, file, valid: false, diagnostics: content.diagnostics }, null, 2)}\n`;
    }
    await writeAtomic(`${base}.md`, markdown);
    await writeAtomic(`${base}.json`, json);
    const report: Report = {
      commit,
      file,
      environment,
      kind: content.kind,
      markdown: `${base}.md`,
      json: `${base}.json`,
    };
    if (content.kind === 'plan') report.plan = content.plan;
    else report.diagnostics = content.diagnostics;
    return report;
  }
}

/** Commits exported for one environment's migrations: `<state>/watch/trees/<environment>/<sha>`. */
function treesOf(stateDir: string, environment: string): string {
  return StateDir.at(stateDir).watchTreesDir(environment);
}

/** Beside the trees: which migration ran from which commit (`{ "<migration id>": "<sha>" }`). */
const treeIndexFile = 'migrations.json';

function readTreeIndex(dir: string): Record<string, string> {
  try {
    const index = JSON.parse(readFileSync(path.join(dir, treeIndexFile), 'utf8')) as unknown;
    return index !== null && typeof index === 'object' ? (index as Record<string, string>) : {};
  } catch {
    return {};
  }
}

async function recordTree(dir: string, migrationId: string, commit: string): Promise<void> {
  const index = readTreeIndex(dir);
  index[migrationId] = commit;
  await writeAtomic(path.join(dir, treeIndexFile), `${JSON.stringify(index, null, 2)}\n`);
}

/** A live slot as its driver reported it (the layout renames it blue; the migration had it green). */
function slotKey(slot: SlotInfo): string {
  return JSON.stringify([slot.component, slot.version, slot.addresses, slot.details ?? null]);
}

function summaryOf(plan: Plan): string {
  return isEmptyPlan(plan) ? 'no changes' : countsLine(plan.summary, plan.actions.length);
}

/** The environment a broken file meant, when its name can still be read; else one made from its path. */
function environmentHint(text: string, file: string): string {
  // The bounded parser, as for the topology itself: the text comes from a commit.
  const parsed = parseYaml(text);
  const name = parsed.ok
    ? (parsed.value as { metadata?: { name?: unknown } } | null)?.metadata?.name
    : undefined;
  if (typeof name === 'string' && /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(name)) return name;
  return `invalid-${file
    .replace(/[^A-Za-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .toLowerCase()}`;
}

function existsDir(dir: string): boolean {
  try {
    readdirSync(dir);
    return true;
  } catch {
    return false;
  }
}

async function writeAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text);
  await rename(tmp, file);
}
