import { describe, expect, it } from 'vitest';
import { emptyLayout } from '../core/layout.js';
import { buildPlan } from '../core/plan/build-plan.js';
import type { Plan } from '../core/plan/types.js';
import { clone, layoutOf, load, shopDoc } from './support/builders.js';

const ids = (plan: Plan) => plan.actions.map((a) => a.id);

describe('planning', () => {
  it('plans nothing when the layout is unchanged', () => {
    const doc = shopDoc();
    const plan = buildPlan(layoutOf(doc, 7), load(doc));
    expect(plan.actions).toEqual([]);
    expect(plan.settings).toEqual([]);
    expect(plan.summary).toEqual({ add: 0, change: 0, remove: 0 });
    expect(plan.baseSerial).toBe(7);
  });

  it('replaces exactly the changed component and its dependents, each with its reason', () => {
    const before = shopDoc();
    const after = clone(before);
    after.components.api = { ...after.components.api, version: '2.1.0' };
    const plan = buildPlan(layoutOf(before), load(after));
    expect(ids(plan)).toEqual([
      'provision_green:api',
      'provision_green:web',
      'health_gate:api',
      'health_gate:web',
      'cutover:shift',
      'drain_blue:web',
      'drain_blue:api',
      'commit:web',
      'commit:api',
    ]);
    const reason = (id: string) => plan.actions.find((a) => a.id === id)?.reason;
    expect(reason('provision_green:api')).toBe('version 2.0.0 → 2.1.0');
    expect(reason('provision_green:web')).toBe('dependency api is replaced');
    expect(plan.actions.find((a) => a.id === 'provision_green:api')?.changes).toEqual([
      { path: 'version', before: '2.0.0', after: '2.1.0' },
    ]);
    // db (a dependency) and mailer (unrelated) are untouched.
    expect(plan.actions.some((a) => a.component === 'db' || a.component === 'mailer')).toBe(false);
    expect(plan.summary).toEqual({ add: 0, change: 2, remove: 0 });
  });

  it('replicates state when a stateful component is replaced, before the health gate', () => {
    const before = shopDoc();
    const after = clone(before);
    after.components.db = { ...after.components.db, version: '16' };
    const plan = buildPlan(layoutOf(before), load(after));
    expect(ids(plan).slice(0, 7)).toEqual([
      'provision_green:db',
      'provision_green:api',
      'provision_green:web',
      'replicate:db',
      'health_gate:db',
      'health_gate:api',
      'health_gate:web',
    ]);
  });

  it('updates a route whose upstreamTimeout alone changed, and shows it as a duration', () => {
    const before = shopDoc();
    const after = clone(before);
    after.routes = { public: { listen: '127.0.0.1:18080', to: 'web', upstreamTimeout: '90s' } };
    const plan = buildPlan(layoutOf(before), load(after));
    expect(ids(plan)).toEqual(['cutover:route:public']);
    expect(plan.actions[0]?.changes).toEqual([{ path: 'upstreamTimeout', after: '1m30s' }]);
    // Components are untouched: no green slot for a route setting.
    expect(plan.summary).toEqual({ add: 0, change: 1, remove: 0 });
  });

  it('adds everything against an empty layout', () => {
    const plan = buildPlan(emptyLayout('shop'), load(shopDoc()));
    expect(plan.summary).toEqual({ add: 5, change: 0, remove: 0 });
    expect(ids(plan)).toContain('cutover:route:public');
    expect(plan.actions.filter((a) => a.stage === 'drain_blue' || a.stage === 'commit')).toEqual([]);
    expect(plan.baseSerial).toBe(0);
  });

  it('drains and retires a removed component, dependents first', () => {
    const before = shopDoc();
    const after = clone(before);
    delete after.components.mailer;
    const plan = buildPlan(layoutOf(before), load(after));
    expect(plan.actions.map((a) => [a.id, a.type])).toEqual([
      ['drain_blue:mailer', 'drain'],
      ['commit:mailer', 'retire'],
    ]);
    expect(plan.summary).toEqual({ add: 0, change: 0, remove: 1 });
  });

  it('records settings-only changes without actions, and they change the plan id', () => {
    const before = shopDoc();
    const after = clone(before);
    after.strategy = { bake: '30s' };
    const unchanged = buildPlan(layoutOf(before), load(before));
    const plan = buildPlan(layoutOf(before), load(after));
    expect(plan.actions).toEqual([]);
    expect(plan.settings).toEqual([{ path: 'strategy.bake', before: '0s', after: '30s' }]);
    expect(plan.planId).not.toBe(unchanged.planId);
  });

  it('gives a different plan id for a different base serial', () => {
    const doc = shopDoc();
    const a = buildPlan(layoutOf(doc, 1), load(doc));
    const b = buildPlan(layoutOf(doc, 2), load(doc));
    expect(a.planId).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(a.planId).not.toBe(b.planId);
  });

  it('replaces components whose driver settings changed, and says so', () => {
    const before = shopDoc();
    const after = clone(before);
    after.drivers.infra = { type: 'exec', dir: './infra-v2' };
    const plan = buildPlan(layoutOf(before), load(after));
    expect(plan.actions.find((a) => a.id === 'provision_green:db')?.reason).toBe(
      'drivers.infra.dir ./infra → ./infra-v2',
    );
    expect(plan.settings).toEqual([]);
  });

  it('refuses to plan one environment against another', () => {
    const other = shopDoc();
    other.metadata.name = 'staging';
    expect(() => buildPlan(layoutOf(other), load(shopDoc()))).toThrow(
      /cannot plan environment "shop" against the layout of "staging"/,
    );
  });
});
