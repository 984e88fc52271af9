/**
 * The switch of a stateful component through the step function (issue 28, core/migration/switch.ts):
 * the shift of a route that reaches it is one switch (hold, fence blue, catch up, promote green,
 * reverse, then 100 % which releases the hold); a step that fails undoes it with blue unfenced
 * before the routes go back; a rollback after it switches back first.
 */
import { describe, expect, it } from 'vitest';
import { describeCommand } from '../../../core/migration/queries.js';
import type { Command, MigrationSpec } from '../../../core/migration/types.js';
import { undoPrerequisites } from '../../../core/migration/undo-order.js';
import { clone, shopDoc } from '../../support/builders.js';
import { Driver, specOf } from '../../support/migration-builders.js';

/** shop with db (stateful) bumped: db, api and web replaced; db switched. */
function switchedSpec(commit: 'auto' | 'manual' = 'auto', shift: unknown[] = [10, 50, 100]): MigrationSpec {
  const before = shopDoc();
  const after = clone(before);
  after.components.db = { ...after.components.db, version: '16' };
  after.routes = { public: { ...(after.routes?.public ?? {}), shift } };
  after.strategy = { commit };
  return { ...specOf(before, after), switched: ['db'] };
}

/** Runs a migration, answering a fence with a position and a hold with when it began. */
function drive(
  d: Driver,
  fail: (c: Command) => boolean = () => false,
  until = (_: Driver) => false,
  retryable = false,
): Driver {
  for (let i = 0; i < 300 && d.state.inflight[0] && !until(d); i++) {
    const c = d.state.inflight[0];
    if (fail(c)) {
      d.event({ type: 'command_failed', commandId: c.id, error: { message: 'boom', retryable } });
    } else if (c.kind === 'fence') {
      d.event({ type: 'command_succeeded', commandId: c.id, switched: { position: `0/${c.slot}` } });
    } else if (c.kind === 'hold_routes') {
      d.event({ type: 'command_succeeded', commandId: c.id, switched: { heldAt: d.clock } });
    } else d.complete();
  }
  return d;
}

const said = (d: Driver) => d.log.map((c) => describeCommand(c));

/** A switch back to blue, as it runs before green is retired. */
const switchBack = [
  'hold requests of public (budget 2s)',
  'fence green db',
  'blue db catches up with green',
  'promote blue db',
  'unfence blue db',
  'route public back to blue',
];

describe('the switch of a stateful component', () => {
  it('replaces the stepped shift: hold, fence blue, catch up, promote green, reverse, then 100 % releasing the hold', () => {
    const d = drive(new Driver(switchedSpec()));
    expect(d.state.lifecycle).toBe('completed');
    const shift = said(d).slice(said(d).findIndex((c) => c.startsWith('hold requests')));
    expect(shift.slice(0, 6)).toEqual([
      'hold requests of public (budget 2s)',
      'fence blue db',
      'green db catches up with blue',
      'promote green db',
      'replicate db from green back to blue',
      'route public at 100% green',
    ]);
    // No 10 % or 50 % step: writes never split between two primaries.
    expect(said(d).filter((c) => /at (10|50)% green/.test(c))).toEqual([]);
    expect(d.notices.map((n) => n.kind)).toEqual(
      expect.arrayContaining(['write_hold_started', 'write_hold_ended']),
    );
    expect(d.notices.find((n) => n.kind === 'write_hold_ended')?.message).toMatch(/went to green/);
  });

  it('a catch-up that fails: blue is unfenced before the routes go back (releasing the hold to blue)', () => {
    const d = drive(new Driver(switchedSpec()), (c) => c.kind === 'catch_up');
    expect(d.state.lifecycle).toBe('failed');
    const undo = d.state.ending?.steps.map((c) => describeCommand(c)) ?? [];
    expect(undo.slice(0, 2)).toEqual(['unfence blue db', 'route public back to blue']);
    expect(undo).toContain('retire green db');
    const order = undoPrerequisites(d.state.ending?.steps ?? [], d.state.spec.desired);
    expect(order[1]).toEqual([0]); // the routes wait for blue to be writable
    expect(d.state.switch?.fenced).toEqual([]);
    expect(d.notices.find((n) => n.kind === 'write_hold_ended')?.message).toMatch(
      /^the switch is undone \(green db catches up with blue: boom\)/,
    );
  });

  it('a release to green that fails for good (past the budget, before the routes moved) undoes the switch: no switch back, blue unfenced, routes back to blue', () => {
    const release = (c: Command) => c.kind === 'shift_routes' && !c.restore && c.greenPercent === 100;
    const d = new Driver(switchedSpec());
    drive(d, (c) => release(c) && !d.state.ending);
    expect(d.state.lifecycle).toBe('failed');
    const undo = d.state.ending?.steps.map((c) => describeCommand(c)) ?? [];
    // Green never took a write: nothing to bring back from it.
    expect(undo.filter((c) => /^hold requests|^fence|catches up|^promote/.test(c))).toEqual([]);
    expect(undo.slice(0, 2)).toEqual(['unfence blue db', 'route public back to blue']);
    expect(undo).toContain('retire green db');
    expect(d.notices.find((n) => n.kind === 'write_hold_ended')?.message).toMatch(
      /^write hold ended after \d+ ms: the held requests went to blue/,
    );
  });

  it('a rollback from awaiting_commit switches back: hold at 100 %, fence green, blue catches up, promote blue, unfence it, then routes back', () => {
    const d = drive(new Driver(switchedSpec('manual')));
    expect(d.state.lifecycle).toBe('awaiting_commit');
    d.verb('rollback');
    drive(d);
    expect(d.state.lifecycle).toBe('rolled_back');
    const undo = d.state.ending?.steps.map((c) => describeCommand(c)) ?? [];
    expect(undo.slice(0, 7)).toEqual([...switchBack, expect.stringMatching(/^retire green/)]);
    const hold = d.state.ending?.steps[0] as Extract<Command, { kind: 'hold_routes' }>;
    expect(hold).toMatchObject({ greenPercent: 100, from: 'green' });
    const order = undoPrerequisites(d.state.ending?.steps ?? [], d.state.spec.desired);
    for (let i = 1; i <= 5; i++) expect(order[i]).toEqual(Array.from({ length: i }, (_, k) => k));
  });

  it('a switch back that fails for good leaves green serving with the writes: routes stay, green is not retired, the rest waits for a person', () => {
    const d = drive(new Driver(switchedSpec('manual')));
    d.verb('rollback');
    // Blue never catches up with green (a fenced green whose writes blue cannot apply in time).
    drive(d, (c) => c.kind === 'catch_up' && c.from === 'green');
    expect(d.state.lifecycle).toBe('rolled_back');
    const ending = d.state.ending;
    const ran = d.log.map((c) => describeCommand(c));
    // Not run: nothing that assumes blue has green's writes.
    expect(ran).not.toContain('promote blue db');
    expect(ran).not.toContain('route public back to blue');
    expect(ran.filter((c) => c.startsWith('retire green'))).toEqual([]);
    // Green made to serve again: unfenced, its route at 100 % without the hold.
    const after = ran.slice(ran.lastIndexOf('blue db catches up with green'));
    expect(after).toEqual(expect.arrayContaining(['unfence green db', 'route public at 100% green']));
    expect(ending?.skipped.map((s) => s.what)).toEqual(
      expect.arrayContaining([
        'blue db catches up with green',
        'route public back to blue',
        'retire green db',
      ]),
    );
    expect(d.notices.at(-1)?.message).toMatch(/blue may not be serving/);
  });

  it('a release back to blue that fails for good (past the budget) gives the switch back up too: routes stay on green, green is not retired', () => {
    const d = drive(new Driver(switchedSpec('manual')));
    d.verb('rollback');
    drive(d, (c) => c.kind === 'shift_routes' && c.restore);
    expect(d.state.lifecycle).toBe('rolled_back');
    const ran = said(d);
    expect(ran.slice(ran.lastIndexOf('route public back to blue'))).toEqual(
      expect.arrayContaining(['unfence green db', 'route public at 100% green']),
    );
    expect(ran.filter((c) => c.startsWith('retire green'))).toEqual([]);
  });

  // Session 16 saw a rollback retry "promote blue store" five times after the hold's budget had run
  // out (each attempt fails the same way), holding writes 13 s against a 3 s budget.
  it('a switch-back step that fails for good is not tried again: the switch back is given up at once', () => {
    const d = drive(new Driver(switchedSpec('manual')));
    d.verb('rollback');
    drive(d, (c) => describeCommand(c) === 'promote blue db');
    expect(d.state.lifecycle).toBe('rolled_back');
    expect(said(d).filter((c) => c === 'promote blue db')).toHaveLength(1);
    expect(d.notices.filter((n) => n.kind === 'action_retry')).toEqual([]);
    expect(said(d).slice(said(d).lastIndexOf('promote blue db'))).toEqual(
      expect.arrayContaining(['unfence green db', 'route public at 100% green']),
    );
  });

  it('a switch-back step that may succeed when tried again is retried', () => {
    const d = drive(new Driver(switchedSpec('manual')));
    d.verb('rollback');
    drive(d, (c) => describeCommand(c) === 'promote blue db', undefined, true);
    expect(said(d).filter((c) => c === 'promote blue db').length).toBeGreaterThan(1);
    expect(d.notices.filter((n) => n.kind === 'action_retry').length).toBeGreaterThan(0);
  });

  for (const failing of ['catch-up', 'release'] as const) {
    it(`a retry of a switch back given up (its ${failing} failed) switches back afresh: a new hold, green fenced, blue catches up, before the routes go back`, () => {
      const d = drive(new Driver(switchedSpec('manual')));
      d.verb('rollback');
      const fails = (c: Command) =>
        failing === 'catch-up'
          ? c.kind === 'catch_up' && c.from === 'green'
          : c.kind === 'shift_routes' && c.restore;
      drive(d, fails);
      const before = d.log.length;
      d.event({ type: 'resolve', how: 'retry', by: 'ana' });
      drive(d);
      expect(d.state.lifecycle).toBe('rolled_back');
      const retried = said(d).slice(before);
      expect(retried.slice(0, 6)).toEqual(switchBack);
      expect(retried).toContain('retire green db');
      // Every step left for a person is resolved by the retry (the switch's own by its fresh steps).
      expect(d.state.ending?.skipped.filter((step) => step.resolved === undefined)).toEqual([]);
    });
  }

  for (const verb of ['rollback', 'cancel'] as const) {
    it(`a ${verb} asked while the release to green is in flight switches back: green took writes once it went live`, () => {
      const d = drive(
        new Driver(switchedSpec('auto', [100])),
        () => false,
        (x) => describeCommand(x.state.inflight[0] as Command) === 'route public at 100% green',
      );
      d.verb(verb);
      // The release is a route change: not cut short, it goes live, and green takes writes.
      drive(d);
      expect(d.state.lifecycle).toBe(verb === 'rollback' ? 'rolled_back' : 'cancelled');
      const undone = said(d).slice(said(d).lastIndexOf('route public at 100% green') + 1);
      expect(undone.slice(0, 6)).toEqual(switchBack);
    });
  }

  it('a pause asked during the switch takes effect once the switch is over, not with blue fenced', () => {
    const d = new Driver(switchedSpec());
    drive(
      d,
      () => false,
      (x) => x.state.inflight[0]?.kind === 'fence',
    );
    d.verb('pause');
    drive(
      d,
      () => false,
      (x) => x.state.lifecycle === 'paused',
    );
    expect(d.state.lifecycle).toBe('paused');
    expect(d.state.switch).toMatchObject({ released: true, primary: { db: 'green' } });
    expect(said(d)).toContain('route public at 100% green');
  });

  it('a migration whose spec switches nothing shifts as before', () => {
    const spec = switchedSpec();
    delete spec.switched;
    const d = drive(new Driver(spec));
    expect(said(d)).toContain('route public at 10% green');
    expect(said(d).some((c) => c.startsWith('hold requests'))).toBe(false);
  });
});
