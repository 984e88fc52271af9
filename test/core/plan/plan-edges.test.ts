import { describe, expect, it } from 'vitest';
import { buildPlan } from '../../../core/plan/build-plan.js';
import { describeWaves, planWaves } from '../../../core/plan/plan-edges.js';
import type { Plan } from '../../../core/plan/types.js';
import { clone, layoutOf, load, shopDoc, type TopologyDoc } from '../../support/builders.js';

const empty = (name = 'shop') => ({ environment: name, serial: 0, topology: null });

/** db and cache (independent), api on both, a route to api. */
function threeTier(): TopologyDoc {
  return {
    apiVersion: 'cutover/v1',
    kind: 'Topology',
    metadata: { name: 'shop' },
    drivers: { apps: { type: 'process' } },
    components: {
      db: { driver: 'apps', version: '1', run: { command: ['db'] } },
      cache: { driver: 'apps', version: '1', run: { command: ['cache'] } },
      api: { driver: 'apps', version: '1', run: { command: ['api'] }, dependsOn: ['db', 'cache'] },
    },
    routes: { public: { listen: '127.0.0.1:18080', to: 'api' } },
  };
}

function afterOf(plan: Plan, id: string): string[] | undefined {
  return plan.actions.find((a) => a.id === id)?.after;
}

/** Every edge points to an earlier action: plan order is a topological order. */
function expectTopological(plan: Plan): void {
  const seen = new Set<string>();
  for (const a of plan.actions) {
    for (const id of a.after ?? []) expect(seen, `${a.id} waits for ${id}`).toContain(id);
    seen.add(a.id);
  }
}

describe('the plan as a graph (format 1.2)', () => {
  it('brings green up dependencies first, gates after their own provision and their dependencies gates', () => {
    const plan = buildPlan(empty(), load(threeTier()));
    expect(plan.formatVersion).toBe('1.2');
    expectTopological(plan);
    expect(afterOf(plan, 'provision_green:db')).toEqual([]);
    expect(afterOf(plan, 'provision_green:cache')).toEqual([]);
    expect(afterOf(plan, 'provision_green:api')).toEqual(['provision_green:cache', 'provision_green:db']);
    expect(afterOf(plan, 'health_gate:api')).toEqual([
      'provision_green:api',
      'health_gate:cache',
      'health_gate:db',
    ]);
    expect(afterOf(plan, 'cutover:route:public')).toEqual(['health_gate:api']);
    expect(describeWaves(plan.actions)).toBe(
      'wave 1: provision cache, db · wave 2: provision api; gate cache, db · wave 3: gate api · wave 4: route public',
    );
  });

  it('takes blue down dependents first, after the traffic moved, and retires after the drain', () => {
    const before = threeTier();
    const after = clone(before);
    for (const c of Object.values(after.components)) c.version = '2';
    const plan = buildPlan(layoutOf(before), load(after));
    expectTopological(plan);
    expect(afterOf(plan, 'replicate:db')).toBeUndefined();
    expect(afterOf(plan, 'drain_blue:api')).toEqual(['health_gate:api', 'cutover:shift']);
    expect(afterOf(plan, 'drain_blue:db')).toEqual(['health_gate:db', 'drain_blue:api']);
    expect(afterOf(plan, 'commit:api')).toEqual(['drain_blue:api']);
    expect(afterOf(plan, 'commit:db')).toEqual(['drain_blue:db', 'commit:api']);
    // The commit is a barrier: every retirement comes in a wave after every drain.
    const waves = planWaves(plan.actions);
    const lastBeforeCommit = waves.findLastIndex((w) => w.some((a) => a.stage !== 'commit'));
    const firstCommit = waves.findIndex((w) => w.some((a) => a.stage === 'commit'));
    expect(firstCommit).toBe(lastBeforeCommit + 1);
  });

  it('replicates after its provision and gates after the replication', () => {
    const before = shopDoc();
    const after = clone(before);
    (after.components.db as Record<string, unknown>).version = '16';
    const plan = buildPlan(layoutOf(before), load(after));
    expectTopological(plan);
    expect(afterOf(plan, 'replicate:db')).toEqual(['provision_green:db']);
    expect(afterOf(plan, 'health_gate:db')).toEqual(['provision_green:db', 'replicate:db']);
  });

  it('keeps plan ids deterministic whatever the order of the file', () => {
    const doc = threeTier();
    const reordered = { ...doc, components: Object.fromEntries(Object.entries(doc.components).reverse()) };
    expect(buildPlan(empty(), load(reordered)).planId).toBe(buildPlan(empty(), load(doc)).planId);
  });

  it('reads a plan of format 1.0 (no edges) as one action after another', () => {
    const plan = buildPlan(empty(), load(threeTier()));
    const old = plan.actions.map(({ after: _after, ...rest }) => rest);
    expect(planWaves(old).map((w) => w.length)).toEqual(old.map(() => 1));
  });
  it('shifts every route moving to green in one action, after the gates of all their components', () => {
    const before = threeTier();
    before.routes = {
      public: { listen: '127.0.0.1:18080', to: 'api', shift: [10, 50, 100] },
      admin: { listen: '127.0.0.1:18081', to: 'db', shift: [50, 100] },
      status: { listen: '127.0.0.1:18082', to: 'cache' },
    };
    const after = clone(before);
    for (const c of ['api', 'db']) (after.components[c] as { version: string }).version = '2';
    const plan = buildPlan(layoutOf(before), load(after));
    expectTopological(plan);
    const shifts = plan.actions.filter((a) => a.type === 'shift_traffic');
    expect(shifts.map((a) => [a.id, a.routes, a.route])).toEqual([
      ['cutover:shift', ['admin', 'public'], undefined],
    ]);
    expect(afterOf(plan, 'cutover:shift')).toEqual(['health_gate:db', 'health_gate:api']);
    expect(shifts[0]?.reason).toBe(
      'shift admin (127.0.0.1:18081 → db), public (127.0.0.1:18080 → api) to green together: 10% → 50% → 100%',
    );
    // The drains of what the routes sent traffic to wait for it.
    expect(afterOf(plan, 'drain_blue:db')).toContain('cutover:shift');
    expect(describeWaves(plan.actions)).toContain('route admin + public');
  });
});
