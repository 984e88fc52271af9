/**
 * A Temporal run continued from an earlier version carries the state in its old shape (one command
 * in flight at most): upgraded, it is the state today's step function has at the same point.
 */
import { describe, expect, it } from 'vitest';
import type { Command, MigrationState } from '../../../core/migration/types.js';
import { upgradeState } from '../../../core/migration/upgrade-state.js';
import { bumpSpec, Driver } from '../../support/migration-builders.js';

/** The shape an earlier version stored, from a state of a one-at-a-time run. */
function oldShape(s: MigrationState): unknown {
  const { done: _done, running, inflight, cancelling, ...rest } = s;
  const run = running[0];
  return {
    ...rest,
    subStep: run?.subStep ?? 0,
    attempt: run ? run.attempt : s.attempt,
    gateRemainingMs: run?.gateRemainingMs ?? null,
    inflight: (inflight[0] as Command | undefined) ?? null,
    cancelling: cancelling[0] ?? null,
  };
}

describe('upgradeState', () => {
  it('gives, at every step of a migration, the state the step function has there', () => {
    const d = new Driver(bumpSpec('auto', '30s'));
    let failed = false;
    let paused = false;
    let checked = 0;
    const same = () => {
      expect(upgradeState(oldShape(d.state) as MigrationState)).toEqual(d.state);
      checked++;
    };
    for (let i = 0; i < 200 && d.state.inflight.length > 0; i++) {
      same();
      const c = d.state.inflight[0] as Command;
      if (c.kind === 'check_health' && !failed) {
        // A transient failure: the gate's retry wait is the action's command in flight.
        failed = true;
        d.complete(() => 'fail');
      } else if (c.kind === 'check_health' && !paused) {
        // A pause interrupts the gate; it goes on later with the deadline it had left.
        paused = true;
        d.verb('pause');
        same();
        d.complete();
        same();
        expect(d.state.lifecycle).toBe('paused');
        d.verb('resume');
      } else {
        d.complete();
      }
    }
    expect(failed && paused).toBe(true);
    expect(d.state.lifecycle).toBe('completed');
    expect(upgradeState(oldShape(d.state) as MigrationState)).toEqual(d.state);
    expect(checked).toBeGreaterThan(10);
  });

  it('leaves a state of today unchanged', () => {
    const d = new Driver(bumpSpec());
    expect(upgradeState(d.state)).toBe(d.state);
  });
});
