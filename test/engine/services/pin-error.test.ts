/**
 * Why a pinned plan is refused: stale (the layout moved on since it was planned) or different (the
 * topology changed). Only the last layouts are kept (CUTOVER_KEEP_LAYOUTS), so the layout a stale
 * plan was computed against may be gone: the refusal must not then claim the file changed.
 */
import { describe, expect, it } from 'vitest';
import type { CurrentLayout } from '../../../core/layout.js';
import { buildPlan } from '../../../core/plan/build-plan.js';
import { pinError, refuseMovedLayout } from '../../../engine/services/migration-common.js';
import { clone, load, shopDoc } from '../../support/builders.js';

function layoutWith(serial: number, version: string): CurrentLayout {
  const doc = clone(shopDoc());
  (doc.components.web as Record<string, unknown>).version = version;
  return { environment: 'shop', serial, topology: load(doc) };
}

describe('a pinned plan refused', () => {
  const desired = layoutWith(0, '9.0.0').topology as NonNullable<CurrentLayout['topology']>;
  const layouts = [1, 2, 3, 4].map((serial) => layoutWith(serial, `${serial}.0.0`));
  const reviewed = buildPlan(layouts[1] as CurrentLayout, desired).planId; // against serial 2
  const now = buildPlan(layouts[3] as CurrentLayout, desired); // serial 4

  it('is stale while the layout it was planned against is kept', async () => {
    const kept = async (serial: number) => layouts.find((l) => l.serial === serial) ?? null;
    expect(await pinError(kept, reviewed, now, desired)).toMatchObject({ code: 'PLAN_STALE' });
  });

  it('says the layout it may have been planned against is no longer kept, not only that the file changed', async () => {
    const lastTwo = async (serial: number) => (serial >= 3 ? (layouts[serial - 1] ?? null) : null);
    const error = await pinError(lastTwo, reviewed, now, desired);
    expect(error.code).toBe('PLAN_MISMATCH');
    expect(error.message).toContain('(layouts before serial 3 are no longer kept, see CUTOVER_KEEP_LAYOUTS)');
    expect(error.message).toContain('CUTOVER_KEEP_LAYOUTS');
  });

  it('says an id is no plan of this topology against any kept layout, not that the file changed', async () => {
    const all = async (serial: number) => (serial === 0 ? null : (layouts[serial - 1] ?? null));
    const other = buildPlan(layouts[1] as CurrentLayout, layoutWith(0, '8.0.0').topology as never).planId;
    const error = await pinError(all, other, now, desired);
    expect(error.code).toBe('PLAN_MISMATCH');
    expect(error.message).toMatch(
      /^plan id sha256:[0-9a-f]{12} is not a plan of this topology against the live layout \(serial 4\) or a recent one: it may have been computed against another branch's file \(--against-ref\) or another topology; plan again against the live layout/,
    );
    expect(error.message).not.toContain('no longer kept');
    expect(error.message).not.toContain('changed since it was planned');
  });

  it('refuses a saved plan whose re-plan differs at the same serial as something besides the layout changing', async () => {
    const all = async (serial: number) => (serial === 0 ? null : (layouts[serial - 1] ?? null));
    const saved = buildPlan(layouts[3] as CurrentLayout, desired, { replace: ['web'] }).planId;
    const error = await pinError(all, saved, now, desired, layouts[3], {}, true);
    expect(error.code).toBe('PLAN_MISMATCH');
    expect(error.message).toContain(
      "re-planning the saved plan's topology against the live layout (serial 4",
    );
    expect(error.message).toContain('something besides the layout changed since it was planned');
  });

  it('refuses a saved plan whose base serial moved as stale, naming both serials and the migration', () => {
    const moved = {
      ...(layouts[3] as CurrentLayout),
      migrationId: 'mig_01kbx',
      committedAt: '2026-11-24T10:00:00.000Z',
    };
    expect(() => refuseMovedLayout(reviewed, 2, moved)).toThrow(
      /^plan sha256:[0-9a-f]{12} is stale: the live layout of shop has moved since it was planned, from serial 2 to serial 4 \(recorded by mig_01kbx on 2026-11-24T10:00:00.000Z\); plan again/,
    );
    expect(() => refuseMovedLayout(reviewed, 4, moved)).not.toThrow();
  });
});
