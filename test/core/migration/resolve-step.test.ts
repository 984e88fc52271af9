/**
 * Undo steps left for a person, resolved through the step function: `resolve --skip` marks them
 * resolved by a person (the migration stays ended); `resolve --retry` runs them again, as undo
 * steps, and the migration ends again once they are done (or are left again).
 */
import { describe, expect, it } from 'vitest';
import { refuseResolve } from '../../../core/migration/resolve-policy.js';
import type { Command } from '../../../core/migration/types.js';
import { shopDoc } from '../../support/builders.js';
import { bumpSpec, Driver, specOf } from '../../support/migration-builders.js';

const failRetire = (c: Command) => (c.kind === 'retire' && c.slot === 'green' ? 'fail' : 'ok');

/** Rolled back after a failed gate, with both green retires skipped for a person. */
function leftForAPerson(): Driver {
  return new Driver(bumpSpec()).run(undefined, (c) =>
    c.kind === 'check_health' ? 'fail-permanent' : failRetire(c),
  );
}

describe('resolving undo steps left for a person', () => {
  it('lists each skipped step with its command, what it was and its error', () => {
    const d = leftForAPerson();
    expect(d.state.lifecycle).toBe('failed');
    const skipped = d.state.ending?.skipped ?? [];
    expect(skipped.map((s) => [s.what, s.error, s.resolved ?? null])).toEqual([
      ['retire green web', 'boom', null],
      ['retire green api', 'boom', null],
    ]);
    expect(skipped.map((s) => s.command.kind)).toEqual(['retire', 'retire']);
  });

  it('--skip marks them resolved by a person, and the migration stays ended', () => {
    const d = leftForAPerson();
    const endedAt = d.state.endedAt;
    const t = d.event({ type: 'resolve', how: 'skip', by: 'ana' });
    expect(t.commands).toEqual([]);
    expect(d.state.lifecycle).toBe('failed');
    expect(d.state.endedAt).toBe(endedAt);
    expect(d.state.ending?.skipped.map((s) => s.resolved)).toEqual([
      { how: 'skipped', at: d.clock, by: 'ana' },
      { how: 'skipped', at: d.clock, by: 'ana' },
    ]);
    expect(t.notices.map((n) => n.message)).toEqual([
      'undo step retire green web marked resolved by ana (not run again)',
      'undo step retire green api marked resolved by ana (not run again)',
    ]);
    expect(refuseResolve(d.state)).toMatch(/no undo step of mig_test is left for a person/);
  });

  it('--retry --step runs that step again as an undo step; once it succeeds it is resolved and the migration ends again', () => {
    const d = leftForAPerson();
    const web = d.state.ending?.skipped[0]?.command as Command;
    const t = d.event({ type: 'resolve', how: 'retry', step: web.id, by: 'ana' });
    expect(d.state.lifecycle).toBe('rolling_back');
    expect(d.state.endedAt).toBe(null);
    expect(t.commands).toHaveLength(1);
    expect(t.commands[0]).toMatchObject({ kind: 'retire', slot: 'green', component: 'web' });
    expect(t.commands[0]?.id).not.toBe(web.id);
    d.run(); // it succeeds now
    expect(d.state.lifecycle).toBe('failed');
    expect(d.state.endedAt).not.toBe(null);
    const [first, second] = d.state.ending?.skipped ?? [];
    expect(first?.resolved).toMatchObject({ how: 'retried', by: 'ana' });
    expect(second?.resolved).toBeUndefined();
    expect(d.notices.at(-1)?.message).toMatch(/undo steps that failed: retire green api: boom$/);
  });

  it('--retry of a step that fails again leaves it for a person again, once', () => {
    const d = leftForAPerson();
    d.event({ type: 'resolve', how: 'retry', by: 'ana' });
    d.run(undefined, failRetire);
    expect(d.state.lifecycle).toBe('failed');
    expect(d.state.ending?.skipped).toHaveLength(2);
    expect(d.state.ending?.skipped.every((s) => s.resolved === undefined)).toBe(true);
  });

  it('refuses with a sentence where nothing can be resolved, and names an unknown step', () => {
    const running = new Driver(bumpSpec());
    expect(refuseResolve(running.state)).toMatch(/cannot resolve mig_test: it has not ended/);
    const d = leftForAPerson();
    expect(refuseResolve(d.state, 'c999')).toMatch(
      /no undo step c999 of mig_test is left for a person; left: c\d+ \(retire green web\), c\d+ \(retire green api\)/,
    );
    expect(refuseResolve(d.state)).toBe(null);
  });
});

describe('the end of a rollback whose route could not be put back', () => {
  it('does not claim that blue is serving', () => {
    // Traffic moved to green, then the route fails for good: neither the shift nor its undo holds.
    const d = new Driver(bumpSpec()).run(undefined, (c) =>
      c.kind === 'shift_routes' ? 'fail-permanent' : 'ok',
    );
    expect(d.state.lifecycle).toBe('failed');
    expect(d.state.ending?.skipped.map((s) => s.command.kind)).toContain('shift_routes');
    const ended = d.notices.at(-1)?.message ?? '';
    expect(ended).not.toContain('blue is serving');
    expect(ended).toMatch(
      /^failed: blue may not be serving: not every route is back on it \(.+\); undo steps that failed: routes? [\w, ]+ back to blue: /,
    );
  });

  it('still says blue is serving when only green was left to retire', () => {
    const d = leftForAPerson();
    expect(d.notices.at(-1)?.message).toMatch(
      /^failed: blue is serving \(.+\); undo steps that failed: retire green web: boom/,
    );
  });

  it('does not claim that blue is serving after a failed first deployment (there is no blue)', () => {
    const d = new Driver(specOf(null, shopDoc())).run(undefined, (c) =>
      c.kind === 'check_health' ? 'fail-permanent' : 'ok',
    );
    expect(d.state.lifecycle).toBe('failed');
    const ended = d.notices.at(-1)?.message ?? '';
    expect(ended).not.toContain('blue');
    expect(ended).toMatch(
      /^failed: nothing is serving: the environment had no layout before \(a first deployment\) \(/,
    );
  });
});
