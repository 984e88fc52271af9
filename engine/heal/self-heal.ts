/**
 * Self-heal (`cutover watch --self-heal`, `cutover server --self-heal`): on an interval, each
 * environment's recorded topology is planned against what runs (the plan observes first); when the
 * plan finds drift and no migration is in flight, a migration of the recorded topology is started,
 * which repairs it through the ordinary green-blue machinery. The front ends only start and stop
 * this loop; when to look, the backoff and the bound are decided here.
 *
 * Invariants:
 * - at most one repair in flight per environment, and none while any migration is in flight (the
 *   engine's claim refuses a second one anyway);
 * - after a repair that failed, the environment is not repaired again before `backoffMs` of its
 *   failures in a row (doubling, capped);
 * - at most `maxRepairsPerHour` repairs of an environment in any hour: one more is not started,
 *   the loop stops healing that environment and says so (a repair that does not hold needs a person);
 * - every repair is one log line naming what drifted and the migration, and an event.
 */
import { CutoverError } from '../../core/errors.js';
import { isFinal } from '../../core/migration/types.js';
import { topologyText } from '../../core/topology/render-topology.js';
import type { MigrationService } from '../services/service-types.js';

/** Default look interval (`--heal-interval`). */
export const defaultHealIntervalMs = 10_000;
/** Default bound on repairs of one environment per hour. */
export const defaultMaxRepairsPerHour = 6;
/** The longest wait after failed repairs. */
export const maxHealBackoffMs = 10 * 60_000;
const hourMs = 60 * 60_000;

/** One thing drifted, as the plan names it. */
export interface HealDrift {
  kind: string;
  name: string;
  reason: string;
}

export type HealEvent =
  | { type: 'repair_started'; at: string; environment: string; migrationId: string; drift: HealDrift[] }
  | { type: 'repair_completed'; at: string; environment: string; migrationId: string }
  | {
      type: 'repair_failed';
      at: string;
      environment: string;
      migrationId: string | null;
      reason: string;
      /** When the environment is looked at again. */
      retryAt: string;
    }
  | { type: 'heal_stopped'; at: string; environment: string; reason: string };

/** An environment to keep healed, and the service that reaches it. */
export interface HealTarget {
  environment: string;
  service: MigrationService;
  /** Where relative paths resolve when the layout records no directory. */
  fallbackBaseDir: string;
}

export interface SelfHealOptions {
  /** The environments to heal, looked up at each round (new ones are picked up). */
  targets(): Promise<HealTarget[]>;
  intervalMs?: number;
  maxRepairsPerHour?: number;
  /** Each line of the loop; an event's line comes with the event (a server logs its fields). */
  log(line: string, event?: HealEvent): void;
  onEvent?(event: HealEvent): void;
  now?(): number;
}

/** After `failures` failed repairs in a row: the interval, doubled each time, at most `maxHealBackoffMs`. */
export function backoffMs(intervalMs: number, failures: number): number {
  return Math.min(maxHealBackoffMs, intervalMs * 2 ** Math.min(failures, 20));
}

/** One line for the log: what happened, what drifted, which migration. */
export function describeHealEvent(event: HealEvent): string {
  switch (event.type) {
    case 'repair_started':
      return `self-heal: ${event.environment}: ${event.drift.map((d) => `${d.kind} ${d.name}: ${d.reason}`).join('; ')}; repairing with migration ${event.migrationId}`;
    case 'repair_completed':
      return `self-heal: ${event.environment}: repaired by ${event.migrationId}`;
    case 'repair_failed':
      return `self-heal: ${event.environment}: repair ${event.migrationId ?? '(not started)'} failed: ${event.reason}; next look at ${event.retryAt}`;
    case 'heal_stopped':
      return `self-heal: ${event.environment}: stopped healing it: ${event.reason}`;
  }
}

interface EnvironmentHeal {
  /** When each repair started (ms), the last hour's. */
  repairs: number[];
  failures: number;
  notBefore: number;
  /** The repair in flight, followed to its end. */
  repairing: string | null;
  stopped: boolean;
  /** This mode observed it once: drift can be seen. */
  observable: boolean;
}

export class SelfHeal {
  private readonly intervalMs: number;
  private readonly maxRepairsPerHour: number;
  private readonly now: () => number;
  private readonly heals = new Map<string, EnvironmentHeal>();
  private timer: NodeJS.Timeout | null = null;
  private round: Promise<void> = Promise.resolve();
  private stopped = false;
  /** Router supervision, one per service (a state directory) among the targets, until `stop`. */
  private readonly supervising = new Map<MigrationService, AbortController>();

  constructor(private readonly options: SelfHealOptions) {
    this.intervalMs = options.intervalMs ?? defaultHealIntervalMs;
    this.maxRepairsPerHour = options.maxRepairsPerHour ?? defaultMaxRepairsPerHour;
    this.now = options.now ?? Date.now;
  }

  /** Looks now, then every interval, until `stop`. */
  start(): void {
    this.options.log(
      `self-heal: looking for drift every ${this.intervalMs / 1000} s (at most ${this.maxRepairsPerHour} repairs per environment per hour)`,
    );
    this.schedule(0);
  }

  /** No round starts from here on; resolves once the one under way ended. Repairs in flight go on. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const supervision of this.supervising.values()) supervision.abort();
    this.supervising.clear();
    await this.round;
  }

  /** One round over every target, now (the timer's, and tests'). */
  check(): Promise<void> {
    const next = this.round.then(() => this.checkAll());
    this.round = next.catch(() => undefined);
    return next;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.check().finally(() => this.schedule(this.intervalMs));
    }, delayMs);
    this.timer.unref?.();
  }

  private async checkAll(): Promise<void> {
    let targets: HealTarget[];
    try {
      targets = await this.options.targets();
    } catch (error) {
      if (error instanceof CutoverError && error.code === 'NOT_SUPPORTED') {
        // Nothing to heal in this mode, ever: said once, and the loop ends.
        this.options.log(`self-heal: stopped: ${messageOf(error)}`);
        this.stopped = true;
        return;
      }
      this.options.log(`self-heal: cannot list the environments: ${messageOf(error)}`);
      return;
    }
    this.superviseRouters(targets);
    for (const target of targets) {
      if (this.stopped) return;
      try {
        await this.checkOne(target);
      } catch (error) {
        // Another migration was claimed between the look and the start: looked at next round.
        if (error instanceof CutoverError && error.code === 'MIGRATION_CONFLICT') continue;
        this.failed(target.environment, this.healOf(target.environment), null, messageOf(error));
      }
    }
  }

  /**
   * A router killed between migrations is started again at once by its service's supervision, not
   * at the next round by a repair migration (its clients would be refused until then).
   */
  private superviseRouters(targets: HealTarget[]): void {
    for (const { service } of targets) {
      if (this.stopped || this.supervising.has(service) || !service.superviseRouters) continue;
      const supervision = new AbortController();
      this.supervising.set(service, supervision);
      void service.superviseRouters({
        signal: supervision.signal,
        log: (line) => this.options.log(`self-heal: ${line}`),
      });
    }
  }

  private healOf(environment: string): EnvironmentHeal {
    let heal = this.heals.get(environment);
    if (!heal) {
      heal = { repairs: [], failures: 0, notBefore: 0, repairing: null, stopped: false, observable: false };
      this.heals.set(environment, heal);
    }
    return heal;
  }

  /** The checklist of one environment: each step returns when there is nothing (more) to do now. */
  private async checkOne(target: HealTarget): Promise<void> {
    const { environment, service } = target;
    const heal = this.healOf(environment);
    if (heal.stopped || this.now() < heal.notBefore) return;
    if (heal.repairing !== null && !(await this.repairEnded(target, heal))) return;
    if ((await service.inFlight(environment)) !== null) return;
    const layout = await service.currentLayout(environment);
    if (layout.topology === null) return; // never migrated, or taken down: nothing to keep
    const file = `${environment} (recorded layout, serial ${layout.serial})`;
    const source = {
      text: topologyText(layout.topology, file),
      file,
      baseDir: layout.baseDir ?? target.fallbackBaseDir,
    };
    if (!heal.observable && !(await this.canObserve(target, heal))) return;
    const plan = await service.plan(source, { kind: 'recorded' });
    const drift = plan.drift ?? [];
    if (drift.length === 0) return;
    const now = this.now();
    heal.repairs = heal.repairs.filter((at) => now - at < hourMs);
    if (heal.repairs.length >= this.maxRepairsPerHour) {
      this.stop_(
        environment,
        heal,
        `${heal.repairs.length} repairs in the last hour did not hold (still: ${drift.map((d) => `${d.kind} ${d.name}: ${d.reason}`).join('; ')}); repair it by hand (\`cutover topology status\`, \`cutover topology migrate\`) and restart self-heal`,
      );
      return;
    }
    const started = await service.start({
      ...source,
      baseDir: layout.baseDir ?? target.fallbackBaseDir,
      planId: plan.planId,
    });
    if (!started.created) {
      this.failed(
        environment,
        heal,
        null,
        'the plan found drift, but starting its migration changed nothing',
      );
      return;
    }
    heal.repairs.push(now);
    heal.repairing = started.summary.id;
    this.emit({
      type: 'repair_started',
      at: iso(now),
      environment,
      migrationId: started.summary.id,
      drift,
    });
  }

  /**
   * Whether this mode can observe what runs (a plan that cannot would never see drift, and the
   * loop would look forever for nothing): asked once per environment; if not, healing it stops.
   */
  private async canObserve(target: HealTarget, heal: EnvironmentHeal): Promise<boolean> {
    try {
      await target.service.observe(target.environment);
    } catch (error) {
      if (error instanceof CutoverError && error.code === 'NOT_SUPPORTED') {
        this.stop_(target.environment, heal, messageOf(error));
        return false;
      }
      throw error;
    }
    heal.observable = true;
    return true;
  }

  /** Whether the repair in flight has ended (and the environment may be looked at again). */
  private async repairEnded(target: HealTarget, heal: EnvironmentHeal): Promise<boolean> {
    const id = heal.repairing as string;
    const { summary } = await target.service.show(id);
    if (!isFinal(summary.lifecycle)) return false;
    heal.repairing = null;
    if (summary.lifecycle === 'completed') {
      heal.failures = 0;
      heal.notBefore = 0;
      this.emit({
        type: 'repair_completed',
        at: iso(this.now()),
        environment: target.environment,
        migrationId: id,
      });
      return true;
    }
    this.failed(target.environment, heal, id, summary.reason ?? summary.status);
    return false;
  }

  private failed(
    environment: string,
    heal: EnvironmentHeal,
    migrationId: string | null,
    reason: string,
  ): void {
    heal.failures += 1;
    heal.notBefore = this.now() + backoffMs(this.intervalMs, heal.failures);
    this.emit({
      type: 'repair_failed',
      at: iso(this.now()),
      environment,
      migrationId,
      reason,
      retryAt: iso(heal.notBefore),
    });
  }

  private stop_(environment: string, heal: EnvironmentHeal, reason: string): void {
    heal.stopped = true;
    this.emit({ type: 'heal_stopped', at: iso(this.now()), environment, reason });
  }

  private emit(event: HealEvent): void {
    this.options.log(describeHealEvent(event), event);
    this.options.onEvent?.(event);
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function messageOf(error: unknown): string {
  return ((error as Error)?.message ?? String(error)).split('\n')[0] ?? '';
}
