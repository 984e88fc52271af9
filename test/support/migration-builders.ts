import { emptyLayout } from '../../core/layout.js';
import { start, step } from '../../core/migration/step.js';
import type {
  AnalysisResult,
  Command,
  MigrationEvent,
  MigrationSpec,
  MigrationState,
  Notice,
  Transition,
  Verb,
} from '../../core/migration/types.js';
import { buildPlan, type PlanInputs } from '../../core/plan/build-plan.js';
import { clone, layoutOf, load, shopDoc, type TopologyDoc } from './builders.js';

type EventInput = MigrationEvent extends infer E
  ? E extends MigrationEvent
    ? Omit<E, 'at'> & { at?: number }
    : never
  : never;

/** A migration spec from two topology docs (before may be null: an empty layout). */
export function specOf(
  before: TopologyDoc | null,
  after: TopologyDoc,
  id = 'mig_test',
  inputs: PlanInputs = {},
): MigrationSpec {
  const base = before ? layoutOf(before, 3) : emptyLayout(after.metadata.name);
  if (before) {
    base.slots = {};
    for (const name of Object.keys(before.components)) {
      base.slots[name] = {
        component: name,
        slot: 'blue',
        version: String(before.components[name]?.version),
        addresses: [`127.0.0.1:1${name.length}000`],
      };
    }
  }
  const desired = load(after);
  return {
    id,
    environment: after.metadata.name,
    plan: buildPlan(base, desired, inputs),
    desired,
    base,
    baseDir: '/tmp',
    createdAt: 1_000,
  };
}

/** shop with api bumped: api and web replaced, a route shifted, with a manual or auto commit. */
export function bumpSpec(commit: 'auto' | 'manual' = 'auto', bake = '0s'): MigrationSpec {
  const before = shopDoc();
  const after = clone(before);
  after.components.api = { ...after.components.api, version: '2.1.0' };
  after.strategy = { commit, bake };
  return specOf(before, after);
}

/**
 * bumpSpec with the route's shift steps (numbers or `{ weight, hold, analysis }`) and hooks
 * (`strategy.hooks` as a file writes them).
 */
export function holdSpec(
  shift: unknown[],
  options: { commit?: 'auto' | 'manual'; hooks?: Record<string, unknown> } = {},
): MigrationSpec {
  const before = shopDoc();
  const after = clone(before);
  after.components.api = { ...after.components.api, version: '2.1.0' };
  after.routes = { public: { ...(after.routes?.public ?? {}), shift } };
  after.strategy = { commit: options.commit ?? 'auto', ...(options.hooks ? { hooks: options.hooks } : {}) };
  return specOf(before, after);
}

/**
 * Drives a migration with scripted results: every command succeeds (driver calls return a slot)
 * unless `outcome` says otherwise. Stops when nothing is in flight, or after `maxSteps`.
 */
export class Driver {
  state: MigrationState;
  readonly log: Command[] = [];
  /** Every notice the step function gave, in order: what a user reads in the migration's log. */
  readonly notices: Notice[] = [];
  /** The journal: the created event, then every event given. */
  readonly events: MigrationEvent[] = [];
  clock = 1_000;
  /** What an `analyze` command finds (default: a pass). */
  analysisOf: (c: Extract<Command, { kind: 'analyze' }>) => AnalysisResult = () => ({
    outcome: 'pass',
    reason: 'green 5xx 0 % ≤ 1 % over 500 requests',
    routes: [],
  });

  constructor(spec: MigrationSpec) {
    this.events.push({ type: 'created', at: spec.createdAt, spec });
    const t = start(spec);
    this.state = t.state;
    this.log.push(...t.commands);
    this.notices.push(...t.notices);
  }

  private apply(t: Transition): Transition {
    this.state = t.state;
    this.log.push(...t.commands);
    this.notices.push(...t.notices);
    return t;
  }

  event(event: EventInput): Transition {
    this.clock += 10;
    const full = { at: this.clock, ...event } as MigrationEvent;
    this.events.push(full);
    return this.apply(step(this.state, full));
  }

  verb(verb: Verb, full?: boolean): Transition {
    return this.event(full ? { type: 'operator', verb, full } : { type: 'operator', verb });
  }

  /** Completes the in-flight command the way `outcome` says (default: success). */
  complete(
    outcome: (c: Command) => 'ok' | 'fail' | 'fail-permanent' | 'cancelled' = () => 'ok',
  ): Transition | null {
    const c = this.state.inflight[0];
    if (!c) return null;
    const o = outcome(c);
    if (o === 'ok' && c.kind === 'analyze') {
      return this.event({ type: 'command_succeeded', commandId: c.id, analysis: this.analysisOf(c) });
    }
    if (o === 'ok') {
      const output =
        c.kind === 'provision'
          ? { component: c.component, slot: 'green' as const, version: 'x', addresses: ['127.0.0.1:9'] }
          : undefined;
      return this.event(
        output
          ? { type: 'command_succeeded', commandId: c.id, output }
          : { type: 'command_succeeded', commandId: c.id },
      );
    }
    if (o === 'cancelled') return this.event({ type: 'command_cancelled', commandId: c.id, elapsedMs: 5 });
    return this.event({
      type: 'command_failed',
      commandId: c.id,
      error: { message: 'boom', retryable: o === 'fail' },
    });
  }

  /** Runs until nothing is in flight or `until` holds. */
  run(
    until: (s: MigrationState) => boolean = () => false,
    outcome?: Parameters<Driver['complete']>[0],
    maxSteps = 500,
  ): this {
    for (let i = 0; i < maxSteps && this.state.inflight[0] && !until(this.state); i++) this.complete(outcome);
    return this;
  }
}
