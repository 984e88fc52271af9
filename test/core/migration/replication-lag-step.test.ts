/**
 * The replication lag of a switched component through the step function and the notifications
 * (issue 28, items 2 and 7; core/migration/replication-lag.ts): a gate's check that finds green
 * trailing by more than maxLag begins one episode (one `replication_lagging` notice and
 * notification) and waits (`wait_lag`), whose end says `replication_caught_up` and passes the
 * gate; a wait past replicate.timeout fails the gate. The write hold's notifications carry its
 * routes, budget, held count and duration.
 */
import { describe, expect, it } from 'vitest';
import { lagWithin } from '../../../core/migration/replication-lag.js';
import type { Command, LagReport, MigrationSpec } from '../../../core/migration/types.js';
import { notificationsOfJournal } from '../../../core/notify/migration-events.js';
import { clone, shopDoc } from '../../support/builders.js';
import { Driver, specOf } from '../../support/migration-builders.js';

/** shop with db (stateful) bumped and switched; db's maxLag 1 s, timeout 20 s. */
function switchedSpec(): MigrationSpec {
  const before = shopDoc();
  const after = clone(before);
  after.components.db = {
    ...after.components.db,
    version: '16',
    replicate: { ...(after.components.db?.replicate ?? {}), maxLag: '1s', timeout: '20s' },
  } as never;
  return { ...specOf(before, after), switched: ['db'] };
}

const lagging: LagReport = { component: 'db', lagMs: 4_200, lagBytes: 8_192, maxLagMs: 1_000 };

/**
 * Runs the migration (until a command `until` picks): db's first gate check finds it lagging, the
 * wait then ends within maxLag (or fails: `failWait`); the hold's release held 7 requests.
 */
function drive(
  d: Driver,
  options: { failWait?: boolean; failCatchUp?: boolean } = {},
  until: (c: Command) => boolean = () => false,
): Driver {
  let lagged = false;
  for (let i = 0; i < 300 && d.state.inflight[0]; i++) {
    const c = d.state.inflight[0] as Command;
    if (until(c)) return d;
    if (c.kind === 'check_health' && c.component === 'db' && !lagged) {
      lagged = true;
      d.event({ type: 'command_succeeded', commandId: c.id, lagging });
    } else if (c.kind === 'wait_lag') {
      if (options.failWait)
        d.event({
          type: 'command_failed',
          commandId: c.id,
          error: { message: 'replication of db lagging: green trails blue by 9s', retryable: false },
        });
      else
        d.event({
          type: 'command_succeeded',
          commandId: c.id,
          lagging: { ...lagging, lagMs: 300, lagBytes: 0 },
        });
    } else if (c.kind === 'catch_up' && options.failCatchUp) {
      d.event({ type: 'command_failed', commandId: c.id, error: { message: 'boom', retryable: false } });
    } else if (c.kind === 'fence') {
      d.event({ type: 'command_succeeded', commandId: c.id, switched: { position: `0/${c.slot}` } });
    } else if (c.kind === 'hold_routes') {
      d.event({ type: 'command_succeeded', commandId: c.id, switched: { heldAt: d.clock } });
    } else if (c.kind === 'shift_routes' && d.state.switch && !d.state.switch.released) {
      d.event({ type: 'command_succeeded', commandId: c.id, switched: { heldCount: 7 } });
    } else d.complete();
  }
  return d;
}

describe('the replication lag at the health gate', () => {
  it('a lag past maxLag is said once, waited for, and its end passes the gate', () => {
    const d = drive(new Driver(switchedSpec()));
    expect(d.state.lifecycle).toBe('completed');
    const kinds = d.notices.map((n) => n.kind);
    expect(kinds.filter((k) => k === 'replication_lagging')).toHaveLength(1);
    expect(kinds.filter((k) => k === 'replication_caught_up')).toHaveLength(1);
    const said = d.notices.find((n) => n.kind === 'replication_lagging');
    expect(said?.level).toBe('warn');
    expect(said?.message).toBe(
      'replication lagging: green db trails blue by 4s200ms, 8192 bytes, more than maxLag 1s; the gate waits (at most replicate.timeout 20s)',
    );
    // The wait comes right after the lagging check, with the component's timeout, before the gate passes.
    const waits = d.log.filter((c) => c.kind === 'wait_lag');
    expect(waits).toEqual([{ id: expect.any(String), kind: 'wait_lag', component: 'db', timeoutMs: 20_000 }]);
    const dbGate = d.notices.findIndex((n) => n.kind === 'gate_passed' && n.message.includes('green db'));
    expect(dbGate).toBeGreaterThan(kinds.indexOf('replication_caught_up'));
    // The switch after it: the hold's end says how many it held.
    expect(d.notices.find((n) => n.kind === 'write_hold_ended')?.message).toMatch(
      /^write hold ended after \d+ ms: the held requests went to green \(7 held\)$/,
    );
  });

  it('a wait past replicate.timeout fails the gate with the lag, and the migration rolls back', () => {
    const d = drive(new Driver(switchedSpec()), { failWait: true });
    expect(d.state.lifecycle).toBe('failed');
    expect(d.state.ending?.reason).toBe(
      'health gate failed for db: replication of db lagging: green trails blue by 9s',
    );
    expect(d.notices.filter((n) => n.kind === 'gate_failed')).toHaveLength(1);
  });

  it('notifications: the episode once, and the write hold with its routes, budget, count and duration', () => {
    const d = drive(new Driver(switchedSpec()));
    const events = notificationsOfJournal(d.events);
    const of = (name: string) => events.filter((e) => e.data.event === name);
    expect(of('replication_lagging')).toHaveLength(1);
    expect(of('replication_lagging')[0]?.data).toMatchObject({
      severity: 'warning',
      component: 'db',
      lag: { lagMs: 4_200, lagBytes: 8_192, maxLagMs: 1_000 },
    });
    expect(of('replication_caught_up')[0]?.data).toMatchObject({
      severity: 'info',
      component: 'db',
      lag: { lagMs: 300, lagBytes: 0 },
    });
    expect(of('write_hold_started')).toHaveLength(1);
    expect(of('write_hold_started')[0]?.data.hold).toEqual({
      routes: ['public'],
      from: 'blue',
      budgetMs: 2_000,
      maxHeld: 1_000,
    });
    const ended = of('write_hold_ended');
    expect(ended).toHaveLength(1);
    // From when the router began to hold (the hold's result) to the release.
    const heldAt = d.state.switch?.heldAt ?? 0;
    expect(ended[0]?.data.hold).toEqual({
      routes: ['public'],
      releasedTo: 'green',
      heldCount: 7,
      durationMs: Date.parse(ended[0]?.time ?? '') - heldAt,
    });
    // The same journal gives the same events (ids included) wherever it is read.
    expect(notificationsOfJournal(d.events)).toEqual(events);
  });

  it('a switch undone: its hold ends once, released to blue', () => {
    const d = drive(new Driver(switchedSpec()), { failCatchUp: true });
    expect(d.state.lifecycle).toBe('failed');
    const ended = notificationsOfJournal(d.events).filter((e) => e.data.event === 'write_hold_ended');
    expect(ended).toHaveLength(1);
    expect(ended[0]?.data.hold).toMatchObject({ routes: ['public'], releasedTo: 'blue', heldCount: 7 });
  });

  it('a pause stops the wait at once; resumed, the gate checks green again (a new episode if it still lags)', () => {
    const d = drive(new Driver(switchedSpec()), {}, (c) => c.kind === 'wait_lag');
    const wait = d.state.inflight.find((c) => c.kind === 'wait_lag') as Command;
    expect(wait).toBeDefined();
    const paused = d.verb('pause');
    expect(paused.cancels).toEqual([wait.id]);
    d.event({ type: 'command_cancelled', commandId: wait.id, elapsedMs: 1_500 });
    expect(d.state.lifecycle).toBe('paused');
    d.verb('resume');
    expect(d.state.inflight.map((c) => `${c.kind} ${'component' in c ? c.component : ''}`)).toContain(
      'check_health db',
    );
  });

  it('within maxLag: by time when the driver tells it, else by nothing left in bytes', () => {
    expect(lagWithin({ lagMs: 1_000, lagBytes: 50 }, 1_000)).toBe(true);
    expect(lagWithin({ lagMs: 1_001, lagBytes: 0 }, 1_000)).toBe(false);
    expect(lagWithin({ lagMs: null, lagBytes: 0 }, 1_000)).toBe(true);
    expect(lagWithin({ lagMs: null, lagBytes: null }, 1_000)).toBe(false);
  });
});
