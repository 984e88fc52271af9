/**
 * Drift in plans (issue 18, item 2): what the drivers observe running, beside the record, makes a
 * plan repair it. Pure: observed layouts are built here, as the drivers would report them.
 */
import { describe, expect, it } from 'vitest';
import type { ObservedLayout, ObservedReplica, ReplicaState, RouteServingState } from '../core/observed.js';
import { buildPlan } from '../core/plan/build-plan.js';
import { canonicalJson } from '../core/plan/canonical-json.js';
import type { Plan } from '../core/plan/types.js';
import { renderPlanJson } from '../views/render-plan-json.js';
import { renderPlanMarkdown } from '../views/render-plan-markdown.js';
import { renderPlanText } from '../views/render-plan-text.js';
import { plainStyle } from '../views/style.js';
import { layoutOf, load, shopDoc } from './support/builders.js';

const ids = (plan: Plan) => plan.actions.map((a) => a.id);
const reason = (plan: Plan, id: string) => plan.actions.find((a) => a.id === id)?.reason;

/** Everything of shopDoc observed running and served, with some replicas and routes changed. */
function observed(
  replicas: Record<string, ReplicaState[]> = {},
  routes: Record<string, RouteServingState> = {},
): ObservedLayout {
  const doc = shopDoc();
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
  return {
    environment: 'shop',
    observedAt: '2026-11-25T10:00:00.000Z',
    components,
    routes: {
      public: { route: 'public', listen: '127.0.0.1:18080', state: routes.public ?? 'served', inFlight: 3 },
    },
  };
}

describe('drift in plans', () => {
  it('keeps a plan byte for byte when everything observed runs as recorded (no drift field)', () => {
    const doc = shopDoc();
    const recordOnly = buildPlan(layoutOf(doc), load(doc));
    const refreshed = buildPlan(layoutOf(doc), load(doc), { observed: observed() });
    expect(canonicalJson(refreshed)).toBe(canonicalJson(recordOnly));
    expect(refreshed).not.toHaveProperty('drift');
    expect(refreshed.actions).toEqual([]);
  });

  it('replaces green-blue a kept component behind a route whose replicas are all dead, naming the drift', () => {
    const doc = shopDoc();
    const plan = buildPlan(layoutOf(doc), load(doc), {
      observed: observed({ web: ['not_running'] }),
    });
    expect(plan.drift).toEqual([{ kind: 'component', name: 'web', reason: '1 of 1 replica not running' }]);
    const actions = [
      'provision_green:web',
      'health_gate:web',
      'cutover:shift',
      'drain_blue:web',
      'commit:web',
    ];
    expect(ids(plan)).toEqual(actions);
    expect(reason(plan, 'provision_green:web')).toBe('1 of 1 replica not running');
    expect(plan.resources).toEqual([
      {
        kind: 'component',
        name: 'web',
        change: 'replace',
        reason: '1 of 1 replica not running',
        changes: [],
        actions: actions.filter((id) => id !== 'cutover:shift'),
      },
    ]);
    expect(plan.summary).toEqual({ add: 0, change: 1, remove: 0 });
  });

  it('moves the routes of a drifted component to its green slot, and replaces its dependents', () => {
    const doc = shopDoc();
    const plan = buildPlan(layoutOf(doc), load(doc), {
      observed: observed({ api: ['not_running', 'not_answering'] }),
    });
    expect(plan.drift).toEqual([
      { kind: 'component', name: 'api', reason: '2 of 2 replicas not running (1 not answering)' },
    ]);
    expect(reason(plan, 'provision_green:api')).toBe('2 of 2 replicas not running (1 not answering)');
    expect(reason(plan, 'provision_green:web')).toBe('dependency api is replaced');
    expect(ids(plan)).toContain('cutover:shift');
  });

  it('re-applies a route that is not served, or whose address another program holds, when its component is kept', () => {
    const doc = shopDoc();
    for (const [state, why] of [
      ['not_served', 'route not served'],
      ['address_taken', 'route address held by another program'],
      ['edited', 'nginx file edited'],
    ] as const) {
      const plan = buildPlan(layoutOf(doc), load(doc), { observed: observed({}, { public: state }) });
      expect(plan.drift).toEqual([{ kind: 'route', name: 'public', reason: why }]);
      expect(plan.actions).toEqual([
        {
          id: 'cutover:route:public',
          stage: 'cutover',
          type: 'update_route',
          route: 'public',
          reason: why,
          after: [],
        },
      ]);
      expect(plan.resources).toMatchObject([
        { kind: 'route', name: 'public', change: 'update', reason: why },
      ]);
    }
  });

  it('is no drift: replicas the driver cannot observe, and what is observed but changes anyway', () => {
    const doc = shopDoc();
    const unknown = buildPlan(layoutOf(doc), load(doc), {
      observed: observed({ db: ['unknown'] }, { public: 'unknown' }),
    });
    expect(unknown.actions).toEqual([]);
    expect(unknown).not.toHaveProperty('drift');
  });

  it('adds the drift to the reason of a component replaced for a change as well', () => {
    const before = shopDoc();
    const after = shopDoc();
    after.components.mailer = { ...after.components.mailer, version: '1.0.0' };
    const plan = buildPlan(layoutOf(before), load(after), {
      observed: observed({ mailer: ['not_running'] }),
    });
    expect(reason(plan, 'provision_green:mailer')).toBe('version 0.9.0 → 1.0.0; 1 of 1 replica not running');
    expect(plan.drift).toHaveLength(1);
  });

  it('gives a plan with drift another id than the record-only plan, and the same id for the same drift', () => {
    const doc = shopDoc();
    const drifted = () =>
      buildPlan(layoutOf(doc), load(doc), { observed: observed({ mailer: ['not_running'] }) });
    expect(drifted().planId).toBe(drifted().planId);
    expect(drifted().planId).not.toBe(buildPlan(layoutOf(doc), load(doc)).planId);
  });

  it('--replace: a green-blue replacement with no change, "replacement requested"; unknown names refused', () => {
    const doc = shopDoc();
    const plan = buildPlan(layoutOf(doc), load(doc), { replace: ['mailer'] });
    expect(reason(plan, 'provision_green:mailer')).toBe('replacement requested');
    expect(ids(plan)).toEqual([
      'provision_green:mailer',
      'health_gate:mailer',
      'drain_blue:mailer',
      'commit:mailer',
    ]);
    expect(plan).not.toHaveProperty('drift');
    expect(() => buildPlan(layoutOf(doc), load(doc), { replace: ['nope'] })).toThrow(
      /--replace nope: environment shop has no component nope/,
    );
  });

  it('shows the drift as its own section in the text, markdown and JSON views', () => {
    const doc = shopDoc();
    const plan = buildPlan(layoutOf(doc), load(doc), {
      observed: observed({ api: ['not_running', 'not_running'] }, { public: 'not_served' }),
    });
    const text = renderPlanText(plan, { style: plainStyle });
    expect(text).toContain(
      'Changed outside of cutover:\n  ! component api: 2 of 2 replicas not running\n  ! route public: route not served\n',
    );
    expect(text.indexOf('Changed outside of cutover')).toBeLessThan(
      text.indexOf('component api will be replaced'),
    );
    const markdown = renderPlanMarkdown(plan);
    expect(markdown).toContain('**Changed outside of cutover**');
    expect(markdown).toContain('- component **api**: 2 of 2 replicas not running');
    expect(JSON.parse(renderPlanJson(plan)).drift).toEqual([
      { kind: 'component', name: 'api', reason: '2 of 2 replicas not running' },
      { kind: 'route', name: 'public', reason: 'route not served' },
    ]);
  });
});
