import { describe, expect, it } from 'vitest';
import { replay, step } from '../core/migration/step.js';
import type { Command, Lifecycle, MigrationEvent, MigrationState, Verb } from '../core/migration/types.js';
import { verbs } from '../core/migration/types.js';
import { refuseVerb, verbTable } from '../core/migration/verb-policy.js';
import { bumpSpec, Driver } from './support/migration-builders.js';

const kinds = (commands: readonly Command[]) =>
  commands.map((c) =>
    c.kind === 'retire'
      ? `retire:${c.slot}:${c.component}`
      : `${c.kind}${'component' in c ? `:${c.component}` : 'route' in c ? `:${c.route}` : ''}`,
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
      'apply_route:public',
      'drain:web',
      'drain:api',
      'record_layout',
      'apply_route:public',
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
        expect(refusal).toMatch(/^cannot (pause|resume|roll back|cancel|commit) mig_test: /);
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
    expect(kinds(d.log.slice(from))).toEqual(['apply_route:public', 'retire:green:web', 'retire:green:api']);
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
    expect(d.log.some((c) => c.kind === 'apply_route')).toBe(false);
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
