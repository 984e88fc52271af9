/**
 * Drift repaired in place (issue 18, item 2): a component on the process driver whose only drift is
 * replicas down, and on which no traffic depends (no route to it, no component depending on it),
 * is restarted in place; every other drifted component keeps its green-blue replacement. Pure.
 */
import { describe, expect, it } from 'vitest';
import type { ObservedLayout, ObservedReplica, ReplicaState } from '../../../core/observed.js';
import { buildPlan } from '../../../core/plan/build-plan.js';
import type { Plan } from '../../../core/plan/types.js';
import { renderPlanMarkdown } from '../../../views/render-plan-markdown.js';
import { renderPlanText } from '../../../views/render-plan-text.js';
import { plainStyle } from '../../../views/style.js';
import { clone, layoutOf, load, shopDoc, type TopologyDoc } from '../../support/builders.js';

const ids = (plan: Plan) => plan.actions.map((a) => a.id);

/** Every component of `doc` observed running, except the replica states given. */
function observed(doc: TopologyDoc, replicas: Record<string, ReplicaState[]>): ObservedLayout {
  const components: ObservedLayout['components'] = {};
  for (const [name, spec] of Object.entries(doc.components)) {
    const count = (spec.replicas as number | undefined) ?? 1;
    const states = replicas[name] ?? Array.from({ length: count }, () => 'running' as const);
    components[name] = {
      component: name,
      slot: 'blue',
      version: spec.version as string,
      replicas: states.map((state, i): ObservedReplica => ({ address: `127.0.0.1:${4000 + i}`, state })),
    };
  }
  return { environment: doc.metadata.name, observedAt: '2026-11-25T10:00:00.000Z', components, routes: {} };
}

/** shop with a background worker: two replicas on the process driver, no route, no dependents. */
function withWorker(): TopologyDoc {
  const doc = shopDoc();
  doc.components.worker = {
    driver: 'apps',
    version: '1.0.0',
    run: { command: ['node', 'w.js'] },
    replicas: 2,
  };
  return doc;
}

describe('restart in place', () => {
  it('restarts the dead replicas of a component no traffic depends on, then checks its health', () => {
    const doc = withWorker();
    const plan = buildPlan(layoutOf(doc), load(doc), {
      observed: observed(doc, { worker: ['not_running', 'not_answering'] }),
    });
    const reason = 'restart 2 of 2 replicas in place (no traffic depends on worker)';
    expect(plan.actions).toEqual([
      {
        id: 'provision_green:restart:worker',
        stage: 'provision_green',
        type: 'restart',
        component: 'worker',
        reason,
        after: [],
      },
      {
        id: 'health_gate:worker',
        stage: 'health_gate',
        type: 'check_health',
        component: 'worker',
        reason: 'restarted replicas must start and stay up (no health check configured)',
        after: ['provision_green:restart:worker'],
      },
    ]);
    expect(plan.resources).toEqual([
      {
        kind: 'component',
        name: 'worker',
        change: 'restart',
        reason,
        changes: [],
        actions: ['provision_green:restart:worker', 'health_gate:worker'],
      },
    ]);
    expect(plan.drift).toEqual([
      { kind: 'component', name: 'worker', reason: '2 of 2 replicas not running (1 not answering)' },
    ]);
    expect(plan.summary).toEqual({ add: 0, change: 1, remove: 0 });
  });

  it('counts only the replicas that are down, and says so in every view', () => {
    const doc = withWorker();
    const plan = buildPlan(layoutOf(doc), load(doc), {
      observed: observed(doc, { worker: ['running', 'not_running'] }),
    });
    expect(plan.actions[0]?.reason).toBe('restart 1 of 2 replicas in place (no traffic depends on worker)');
    const text = renderPlanText(plan, { style: plainStyle });
    expect(text).toContain('component worker will be restarted in place');
    expect(text).not.toContain('worker will be replaced');
    expect(renderPlanMarkdown(plan)).toContain('restart 1 of 2 replicas in place');
  });

  it('keeps green-blue for drift of what traffic depends on: a route target, a dependency', () => {
    const doc = withWorker();
    const plan = buildPlan(layoutOf(doc), load(doc), {
      observed: observed(doc, { web: ['not_running'], api: ['not_running', 'not_running'] }),
    });
    expect(plan.actions.filter((a) => a.type === 'restart')).toEqual([]);
    expect(ids(plan)).toContain('provision_green:web');
    expect(ids(plan)).toContain('provision_green:api');
  });

  it('keeps green-blue for a route target of the live layout, although the desired one drops the route', () => {
    const before = withWorker();
    before.routes = { ...before.routes, jobs: { listen: '127.0.0.1:18081', to: 'worker' } };
    const after = withWorker();
    const plan = buildPlan(layoutOf(before), load(after), {
      observed: observed(before, { worker: ['not_running', 'not_running'] }),
    });
    expect(ids(plan)).toContain('provision_green:worker');
    expect(ids(plan)).not.toContain('provision_green:restart:worker');
  });

  it('keeps green-blue for a driver that cannot restart in place (exec), a requested replacement and a change', () => {
    const doc = withWorker();
    doc.components.batch = { driver: 'infra', version: '1' };
    const exec = buildPlan(layoutOf(doc), load(doc), { observed: observed(doc, { batch: ['not_running'] }) });
    expect(ids(exec)).toEqual([
      'provision_green:batch',
      'health_gate:batch',
      'drain_blue:batch',
      'commit:batch',
    ]);

    const down = observed(doc, { worker: ['not_running', 'not_running'] });
    const requested = buildPlan(layoutOf(doc), load(doc), { observed: down, replace: ['worker'] });
    expect(requested.actions[0]).toMatchObject({
      id: 'provision_green:worker',
      reason: '2 of 2 replicas not running',
    });

    const bumped = clone(doc);
    bumped.components.worker = { ...bumped.components.worker, version: '1.1.0' };
    const changed = buildPlan(layoutOf(doc), load(bumped), { observed: down });
    expect(changed.actions[0]).toMatchObject({
      id: 'provision_green:worker',
      reason: 'version 1.0.0 → 1.1.0; 2 of 2 replicas not running',
    });
  });

  it('keeps green-blue for a worker whose dependency is replaced', () => {
    const before = withWorker();
    (before.components.worker as Record<string, unknown>).dependsOn = ['mailer'];
    const after = clone(before);
    after.components.mailer = { ...after.components.mailer, version: '1.0.0' };
    const plan = buildPlan(layoutOf(before), load(after), {
      observed: observed(before, { worker: ['not_running', 'not_running'] }),
    });
    expect(plan.resources.find((r) => r.name === 'worker')).toMatchObject({
      change: 'replace',
      reason: 'dependency mailer is replaced; 2 of 2 replicas not running',
    });
  });

  it('restarts two workers in dependency order, and gives the same plan id for the same drift', () => {
    const doc = withWorker();
    const plan = () =>
      buildPlan(layoutOf(doc), load(doc), {
        observed: observed(doc, { worker: ['not_running', 'not_running'], mailer: ['not_running'] }),
      });
    expect(ids(plan())).toEqual([
      'provision_green:restart:mailer',
      'provision_green:restart:worker',
      'health_gate:mailer',
      'health_gate:worker',
    ]);
    expect(plan().planId).toBe(plan().planId);
  });
});
