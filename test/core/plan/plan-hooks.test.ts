/** Plans show a topology's hooks to reviewers (where, which, what they call), never a secret. */
import { describe, expect, it } from 'vitest';
import { buildPlan } from '../../../core/plan/build-plan.js';
import { renderPlanJson } from '../../../views/render-plan-json.js';
import { renderPlanMarkdown } from '../../../views/render-plan-markdown.js';
import { renderPlanText } from '../../../views/render-plan-text.js';
import { plainStyle } from '../../../views/style.js';
import { clone, layoutOf, load, shopDoc } from '../../support/builders.js';

function withHooks() {
  const doc = shopDoc();
  doc.strategy = {
    hooks: {
      postRollout: [{ name: 'announce', command: ['./announce.sh', 'done'] }],
      rollout: [
        {
          name: 'smoke-test',
          http: {
            // A credential in a URL is refused (a secret reference instead); any query is left out.
            url: 'https://hooks.example.test/check?run=r-9f2c',
            headers: { Authorization: { secret: 'SMOKE_TOKEN' } },
            signingSecret: { secret: 'HOOK_KEY' },
          },
        },
      ],
      preRollout: [
        { name: 'db-check', command: ['./check.sh'], env: { PASSWORD: { secret: 'DB_PASSWORD' } } },
      ],
    },
  };
  return doc;
}

describe('hooks in plans', () => {
  const before = shopDoc();
  const after = withHooks();
  (after.components.api as Record<string, unknown>).version = '2.1.0';
  const plan = buildPlan(layoutOf(before), load(after));

  it('lists them in the order a migration reaches them, in every format', () => {
    expect(plan.strategy.hooks).toEqual([
      { point: 'preRollout', name: 'db-check', target: './check.sh' },
      { point: 'rollout', name: 'smoke-test', target: 'POST https://hooks.example.test/check?…' },
      { point: 'postRollout', name: 'announce', target: './announce.sh done' },
    ]);
    const line =
      'Hooks: preRollout db-check (./check.sh), rollout smoke-test (POST https://hooks.example.test/check?…), postRollout announce (./announce.sh done).';
    expect(renderPlanText(plan, { style: plainStyle })).toContain(`Strategy: commit auto, bake 0s. ${line}`);
    expect(renderPlanMarkdown(plan)).toContain(line);
    expect(JSON.parse(renderPlanJson(plan)).strategy.hooks).toHaveLength(3);
  });

  it('shows no credential of a URL and no secret value, in any format', () => {
    for (const text of [
      renderPlanText(plan, { style: plainStyle }),
      renderPlanMarkdown(plan),
      renderPlanJson(plan),
    ]) {
      expect(text).not.toContain('r-9f2c');
    }
  });

  it('leaves plans of topologies without hooks as they were', () => {
    const plain = buildPlan(layoutOf(before), load(clone(before)));
    expect(plain.strategy).toEqual({ commit: 'auto', bake: '0s' });
    expect(renderPlanText(plain, { style: plainStyle })).toContain('Strategy: commit auto, bake 0s.\n');
  });
});
