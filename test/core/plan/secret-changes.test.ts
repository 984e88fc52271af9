/**
 * Plans of components whose `env` references secrets: the reference shows as (sensitive), a
 * changed value is told from keyed digests (recorded with the slot vs. now), never from a value.
 */
import { describe, expect, it } from 'vitest';
import type { CurrentLayout } from '../../../core/layout.js';
import { buildPlan } from '../../../core/plan/build-plan.js';
import { describeChange } from '../../../core/plan/diff-values.js';
import { renderPlanJson } from '../../../views/render-plan-json.js';
import { renderPlanMarkdown } from '../../../views/render-plan-markdown.js';
import { renderPlanText } from '../../../views/render-plan-text.js';
import { plainStyle } from '../../../views/style.js';
import { load, shopDoc, type TopologyDoc } from '../../support/builders.js';

const keyA = 'hmac-sha256:aaaaaaaaaaaa';
const keyB = 'hmac-sha256:bbbbbbbbbbbb';

function withSecret(env: Record<string, unknown>): TopologyDoc {
  const doc = shopDoc();
  (doc.components.api as Record<string, unknown>).env = env;
  return doc;
}

/** The layout live after a migration that gave api's slot these digests. */
function liveWith(doc: TopologyDoc, digests?: Record<string, string>): CurrentLayout {
  const slot = { component: 'api', slot: 'blue' as const, version: '2.0.0', addresses: [] };
  return {
    environment: 'shop',
    serial: 3,
    topology: load(doc),
    slots: { api: digests ? { ...slot, secretDigests: digests } : slot },
  };
}

const ref = { DB_PASSWORD: { secret: 'DB_PASSWORD' }, LOG_LEVEL: 'info' };

describe('plans of secrets', () => {
  it('the model holds only the reference', () => {
    const t = load(withSecret(ref));
    expect(t.components.api?.env).toEqual({ DB_PASSWORD: { secret: 'DB_PASSWORD' }, LOG_LEVEL: 'info' });
  });

  it('a changed secret replaces the component: "env.DB_PASSWORD changed (sensitive)"', () => {
    const doc = withSecret(ref);
    const plan = buildPlan(liveWith(doc, { DB_PASSWORD: `${keyA}:01` }), load(doc), {
      secrets: { DB_PASSWORD: `${keyA}:02` },
    });
    const api = plan.resources.find((r) => r.name === 'api');
    expect(api?.change).toBe('replace');
    expect(api?.reason).toBe('env.DB_PASSWORD changed (sensitive)');
    expect(api?.changes).toEqual([
      { path: 'env.DB_PASSWORD', before: '(sensitive)', after: '(sensitive)', sensitive: true },
    ]);
    expect(plan.actions.map((a) => a.id)).toContain('provision_green:api');
    expect(renderPlanText(plan, { style: plainStyle })).toContain('~ env.DB_PASSWORD: changed (sensitive)');
    expect(renderPlanMarkdown(plan)).toContain(
      '| <code>env.DB_PASSWORD</code> | <code>(sensitive)</code> | <code>(sensitive)</code> |',
    );
  });

  it('the same secret plans no change; so does a secret that cannot be compared', () => {
    const doc = withSecret(ref);
    const same = buildPlan(liveWith(doc, { DB_PASSWORD: `${keyA}:01` }), load(doc), {
      secrets: { DB_PASSWORD: `${keyA}:01` },
    });
    expect(same.actions).toEqual([]);
    // Hashed with another key (another state directory): unknown is not a change.
    const otherKey = buildPlan(liveWith(doc, { DB_PASSWORD: `${keyA}:01` }), load(doc), {
      secrets: { DB_PASSWORD: `${keyB}:02` },
    });
    expect(otherKey.actions).toEqual([]);
    // Not readable where the plan is made, or never recorded.
    expect(buildPlan(liveWith(doc, { DB_PASSWORD: `${keyA}:01` }), load(doc), {}).actions).toEqual([]);
    expect(buildPlan(liveWith(doc), load(doc), { secrets: { DB_PASSWORD: `${keyA}:02` } }).actions).toEqual(
      [],
    );
  });

  it('a plain value turned into a reference shows the reference as (sensitive)', () => {
    const before = withSecret({ DB_PASSWORD: 'hunter2', LOG_LEVEL: 'info' });
    const after = withSecret(ref);
    const plan = buildPlan(liveWith(before), load(after));
    const api = plan.resources.find((r) => r.name === 'api');
    expect(api?.changes).toEqual([
      { path: 'env.DB_PASSWORD', before: 'hunter2', after: '(sensitive)', sensitive: true },
    ]);
    expect(renderPlanJson(plan)).not.toContain('"secret"');
  });

  it('a reference added or renamed is a sensitive change; other fields keep their order', () => {
    const before = withSecret({ LOG_LEVEL: 'info' });
    const after = withSecret({ ...ref, LOG_LEVEL: 'debug' });
    (after.components.api as Record<string, unknown>).version = '2.1.0';
    const added = buildPlan(liveWith(before), load(after)).resources.find((r) => r.name === 'api');
    expect(added?.changes.map(describeChange)).toEqual([
      'env.DB_PASSWORD added (sensitive)',
      'env.LOG_LEVEL info → debug',
      'version 2.0.0 → 2.1.0',
    ]);
    const renamed = withSecret({ DB_PASSWORD: { secret: 'DB_PASSWORD_V2' }, LOG_LEVEL: 'info' });
    const plan = buildPlan(liveWith(withSecret(ref)), load(renamed));
    expect(plan.resources.find((r) => r.name === 'api')?.reason).toBe('env.DB_PASSWORD changed (sensitive)');
  });

  it('a changed secret changes the plan id, so a reviewed plan pins it', () => {
    const doc = withSecret(ref);
    const live = liveWith(doc, { DB_PASSWORD: `${keyA}:01` });
    const same = buildPlan(live, load(doc), { secrets: { DB_PASSWORD: `${keyA}:01` } });
    const changed = buildPlan(live, load(doc), { secrets: { DB_PASSWORD: `${keyA}:02` } });
    expect(changed.planId).not.toBe(same.planId);
    expect(buildPlan(live, load(doc), { secrets: { DB_PASSWORD: `${keyA}:02` } }).planId).toBe(
      changed.planId,
    );
  });
});
