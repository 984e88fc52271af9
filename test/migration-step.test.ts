import { describe, expect, it } from 'vitest';
import { replay, step } from '../core/migration/step.js';
import type {
  Command,
  Lifecycle,
  MigrationEvent,
  MigrationSpec,
  MigrationState,
  Verb,
} from '../core/migration/types.js';
import { verbs } from '../core/migration/types.js';
import { refuseVerb, verbTable } from '../core/migration/verb-policy.js';
import { clone, shopDoc } from './support/builders.js';
import { bumpSpec, Driver, holdSpec, specOf } from './support/migration-builders.js';

const kinds = (commands: readonly Command[]) =>
  commands.map((c) =>
    c.kind === 'retire'
      ? `retire:${c.slot}:${c.component}`
      : `${c.kind}${'component' in c ? `:${c.component}` : 'route' in c ? `:${c.route}` : 'routes' in c ? `:${c.routes.join('+')}` : ''}`,
  );

/** A migration brought to each lifecycle state, through the step function itself. */
function inState(lifecycle: Lifecycle): Driver {
  switch (lifecycle) {
    case 'running':
      return new Driver(bumpSpec());
    case 'paused': {
      const d = new Driver(bumpSpec());
      d.verb('pause');
      d.complete();
      return d;
    }
    case 'awaiting_commit':
      return new Driver(bumpSpec('manual')).run();
    case 'awaiting_promotion':
      return new Driver(holdSpec([{ weight: 10, hold: 'manual' }, 100])).run();
    case 'committing':
      return new Driver(bumpSpec()).run((s) => s.lifecycle === 'committing');
    case 'rolling_back': {
      const d = new Driver(bumpSpec()).run((s) => s.cursor >= 2);
      d.verb('rollback');
      return d;
    }
    case 'completed':
      return new Driver(bumpSpec()).run();
    case 'rolled_back': {
      const d = new Driver(bumpSpec()).run((s) => s.cursor >= 2);
      d.verb('rollback');
      return d.run();
    }
    case 'cancelled': {
      const d = new Driver(bumpSpec()).run((s) => s.cursor >= 1);
      d.verb('cancel');
      return d.run();
    }
    case 'failed':
      return new Driver(bumpSpec()).run(undefined, (c) =>
        c.kind === 'check_health' ? 'fail-permanent' : 'ok',
      );
  }
}

const lifecycles = Object.keys(verbTable) as Lifecycle[];

describe('the migration step function', () => {
  it('runs the plan in order, then commits: layout first, then blue retired', () => {
    const d = new Driver(bumpSpec()).run();
    expect(d.state.lifecycle).toBe('completed');
    expect(kinds(d.log)).toEqual([
      'provision:api',
      'provision:web',
      'check_health:api',
      'check_health:web',
      'shift_routes:public',
      'drain:web',
      'drain:api',
      'record_layout',
      'shift_routes:public',
      'retire:blue:web',
      'retire:blue:api',
    ]);
  });

  it.each(lifecycles)('reaches %s through the step function', (lifecycle) => {
    expect(inState(lifecycle).state.lifecycle).toBe(lifecycle);
  });

  describe.each(lifecycles)('in state %s', (lifecycle) => {
    it.each(verbs)('%s is allowed or refused with a sentence, as the table says', (verb: Verb) => {
      const d = inState(lifecycle);
      const before = d.state;
      const refusal = refuseVerb(before, verb);
      expect(refusal === null).toBe(verbTable[lifecycle][verb] === null);
      const t = d.verb(verb);
      if (refusal !== null) {
        expect(refusal).toMatch(/^cannot (pause|resume|roll back|cancel|commit|promote) mig_test: /);
        expect(t.state.lifecycle).toBe(before.lifecycle);
        expect(t.commands).toEqual([]);
        return;
      }
      const expected: Record<Verb, Lifecycle[]> = {
        pause: ['paused', 'running'],
        resume: ['running'],
        rollback: ['rolling_back'],
        cancel: ['rolling_back'],
        commit: ['committing'],
        promote: ['running'],
      };
      expect(expected[verb]).toContain(t.state.lifecycle);
      if (verb === 'pause' && t.state.lifecycle === 'running') expect(t.state.pauseRequested).toBe(true);
    });
  });

  it('says when a committed migration was committed', () => {
    const d = inState('completed');
    expect(refuseVerb(d.state, 'rollback')).toMatch(
      /^cannot roll back mig_test: it is committed \(committed at \d\d:\d\d:\d\d\)$/,
    );
  });

  it('pauses at the next step boundary and resumes where it stopped', () => {
    const d = new Driver(bumpSpec());
    d.verb('pause');
    expect(d.state.lifecycle).toBe('running');
    const t = d.complete();
    expect(t?.commands).toEqual([]);
    expect(d.state.lifecycle).toBe('paused');
    d.verb('resume');
    expect(d.state.inflight[0]?.kind).toBe('provision');
    d.run();
    expect(d.state.lifecycle).toBe('completed');
  });

  it('stops the health gate clock while paused and gives it the rest of its deadline on resume', () => {
    const d = new Driver(bumpSpec()).run((s) => s.inflight[0]?.kind === 'check_health');
    const gate = d.state.inflight[0] as Extract<Command, { kind: 'check_health' }>;
    const t = d.verb('pause');
    expect(t.cancels).toEqual([gate.id]);
    d.event({ type: 'command_cancelled', commandId: gate.id, elapsedMs: 30_000 });
    expect(d.state.lifecycle).toBe('paused');
    d.verb('resume');
    expect(d.state.inflight[0]).toMatchObject({ kind: 'check_health', deadlineMs: gate.deadlineMs - 30_000 });
  });

  it('rolls back after drain, before commit: traffic to blue first, then green retired', () => {
    const d = new Driver(bumpSpec('manual')).run();
    expect(d.state.lifecycle).toBe('awaiting_commit');
    const from = d.log.length;
    d.verb('rollback');
    d.run();
    expect(d.state.lifecycle).toBe('rolled_back');
    expect(kinds(d.log.slice(from))).toEqual(['shift_routes:public', 'retire:green:web', 'retire:green:api']);
    expect(d.log.slice(from)[0]).toMatchObject({ restore: true, greenPercent: 0 });
    expect(d.log.some((c) => c.kind === 'retire' && c.slot === 'blue')).toBe(false);
    expect(d.notices.find((n) => n.kind === 'rollback_started')?.message).toBe(
      'rollback requested; rolling back: routes back to blue first, then green retired',
    );
    // The outcome is said once, the reason says why (it read "rolled back: … (rolled back)").
    expect(d.state.ending?.reason).toBe('rollback requested');
    expect(d.notices.find((n) => n.kind === 'ended')?.message).toBe(
      'rolled back: blue is serving (rollback requested)',
    );
  });

  it('rolls back by itself when the health gate fails, and says why once', () => {
    const d = inState('failed');
    expect(d.state.ending?.reason).toBe('health gate failed for api: boom');
    // Both green slots were up (provision_green runs before health_gate); both go, newest first.
    expect(kinds(d.log.filter((c) => c.kind === 'retire'))).toEqual(['retire:green:web', 'retire:green:api']);
    expect(d.log.some((c) => c.kind === 'apply_route' || c.kind === 'shift_routes')).toBe(false);
    // The reason in the gate's own notice, then what the rollback does: no traffic had moved.
    expect(d.notices.filter((n) => n.message.includes('boom')).map((n) => n.kind)).toContain('gate_failed');
    expect(d.notices.find((n) => n.kind === 'rollback_started')?.message).toBe(
      'rolling back: green retired (no traffic had moved to it)',
    );
  });

  it('retries a transient error with backoff, then fails the action', () => {
    const d = new Driver(bumpSpec()).run(undefined, (c) => (c.kind === 'provision' ? 'fail' : 'ok'));
    const provisions = d.log.filter((c) => c.kind === 'provision');
    const waits = d.log.filter((c) => c.kind === 'wait');
    expect(provisions).toHaveLength(3);
    expect(waits.map((w) => (w as { ms: number }).ms)).toEqual([500, 1000]);
    expect(d.state.lifecycle).toBe('failed');
    expect(d.state.ending?.reason).toBe('provision_green:api failed: boom');
  });

  it('waits the bake time before an auto commit', () => {
    const d = new Driver(bumpSpec('auto', '30s')).run((s) => s.inflight[0]?.kind === 'wait');
    expect(d.state.inflight[0]).toMatchObject({ kind: 'wait', ms: 30_000, purpose: 'bake' });
    expect(d.state.lifecycle).toBe('running');
    d.run();
    expect(d.state.lifecycle).toBe('completed');
  });

  it('keeps retrying a failed commit step instead of undoing it', () => {
    let failures = 0;
    const d = new Driver(bumpSpec()).run(undefined, (c) =>
      c.kind === 'retire' && failures++ < 4 ? 'fail-permanent' : 'ok',
    );
    expect(d.state.lifecycle).toBe('completed');
    expect(d.log.some((c) => c.kind === 'retire' && c.slot === 'green')).toBe(false);
  });

  it('ignores a result for a command it no longer waits for', () => {
    const d = new Driver(bumpSpec());
    const before = d.state;
    const t = step(before, { type: 'command_succeeded', at: 5, commandId: 'c999' });
    expect(t.state.inflight[0]).toEqual(before.inflight[0]);
    expect(t.commands).toEqual([]);
  });

  it('replays a journal to the same state', () => {
    const spec = bumpSpec('manual');
    const events: MigrationEvent[] = [{ type: 'created', at: spec.createdAt, spec }];
    let state: MigrationState = replay(events);
    let at = 2_000;
    while (state.inflight[0]) {
      const event: MigrationEvent = { type: 'command_succeeded', at: at++, commandId: state.inflight[0].id };
      if (state.inflight[0].kind === 'provision')
        event.output = { component: state.inflight[0].component, slot: 'green', version: 'x', addresses: [] };
      events.push(event);
      state = step(state, event).state;
    }
    expect(replay(events)).toEqual(state);
    expect(state.lifecycle).toBe('awaiting_commit');
  });
});

/** shopDoc with a second route, to api, and stepped shifts: web's route [10, 100], api's [50, 100]. */
function twoRouteSpec(): MigrationSpec {
  const before = shopDoc();
  before.routes = {
    public: { listen: '127.0.0.1:18080', to: 'web', shift: [10, 100] },
    internal: { listen: '127.0.0.1:18081', to: 'api', shift: [50, 100] },
  };
  const after = clone(before);
  after.components.api = { ...after.components.api, version: '2.1.0' };
  return specOf(before, after);
}

/** The same spec as a plan of format 1.1 (a journal from before routes moved together): a shift per route. */
function asFormat11(spec: MigrationSpec): MigrationSpec {
  const actions = spec.plan.actions.flatMap((a) => {
    if (a.type !== 'shift_traffic') return [a];
    return (a.routes ?? []).map((route) => {
      const { routes: _routes, ...rest } = a;
      const to = spec.desired.routes[route]?.to as string;
      return { ...rest, id: `cutover:route:${route}`, route, after: [`health_gate:${to}`] };
    });
  });
  const perRoute = (id: string) =>
    id === 'cutover:shift' ? ['cutover:route:internal', 'cutover:route:public'] : [id];
  const plan = {
    ...spec.plan,
    formatVersion: '1.1' as const,
    actions: actions.map((a) => ({ ...a, after: (a.after ?? []).flatMap(perRoute) })),
  };
  return { ...spec, plan };
}

describe('routes shift together', () => {
  it('sets every route at each step in one command, and checks each component between steps', () => {
    const d = new Driver(twoRouteSpec()).run();
    expect(d.state.lifecycle).toBe('completed');
    const cutover = d.log.filter((c) => c.kind === 'shift_routes' || c.kind === 'check_health').slice(2);
    expect(
      cutover.map((c) =>
        c.kind === 'shift_routes' ? `${c.routes.join('+')}@${c.greenPercent}` : c.component,
      ),
    ).toEqual([
      'internal+public@10',
      'api',
      'web',
      'internal+public@50',
      'api',
      'web',
      'internal+public@100',
      'internal+public@0', // the commit: green is each route's live slot, in one command too
    ]);
    expect(d.log.filter((c) => c.kind === 'shift_routes').at(-1)).toMatchObject({ promote: true });
    expect(d.log.some((c) => c.kind === 'apply_route')).toBe(false);
  });

  it('puts every route back on blue in one undo step', () => {
    const d = new Driver(twoRouteSpec()).run((s) => s.inflight.some((c) => c.kind === 'drain'));
    d.verb('rollback');
    d.run();
    expect(d.state.lifecycle).toBe('rolled_back');
    const undo = d.log.filter((c) => c.kind === 'shift_routes' && c.restore);
    expect(undo).toEqual([expect.objectContaining({ routes: ['public', 'internal'], greenPercent: 0 })]);
  });

  it('runs a journal of format 1.1 as it ran: a shift and an undo per route, replayed to the same state', () => {
    const d = new Driver(asFormat11(twoRouteSpec())).run((s) => s.inflight.some((c) => c.kind === 'drain'));
    d.verb('rollback');
    d.run();
    expect(d.state.lifecycle).toBe('rolled_back');
    expect(d.log.some((c) => c.kind === 'shift_routes')).toBe(false);
    // Each route in its own steps, by its own action: public 10 → 100, internal 50 → 100.
    const shifted = d.log.flatMap((c) =>
      c.kind === 'apply_route' && !c.restore ? [`${c.route}@${c.greenPercent}`] : [],
    );
    expect(shifted.sort()).toEqual(['internal@100', 'internal@50', 'public@10', 'public@100']);
    expect(kinds(d.log.filter((c) => c.kind === 'apply_route' && c.restore))).toEqual([
      'apply_route:public',
      'apply_route:internal',
    ]);
    expect(replay(d.events)).toEqual(d.state);
  });
});
