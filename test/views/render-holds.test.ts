import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildPlan } from '../../core/plan/build-plan.js';
import type { Plan } from '../../core/plan/types.js';
import { renderPlanMarkdown } from '../../views/render-plan-markdown.js';
import { renderPlanText } from '../../views/render-plan-text.js';
import { plainStyle } from '../../views/style.js';
import { clone, layoutOf, load, shopDoc } from '../support/builders.js';

/** Golden files: `UPDATE_GOLDEN=1 npx vitest run test/views/render-holds.test.ts` rewrites them. */
function golden(name: string, actual: string): void {
  const file = new URL(`../golden/${name}`, import.meta.url);
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(file, actual);
  expect(actual).toBe(readFileSync(file, 'utf8'));
}

/** A new version of web, shifted in steps that hold: 20 % for 30s with an analysis, 50 % until promoted. */
function steppedPlan(): Plan {
  const before = shopDoc();
  const after = clone(before);
  after.components.web = { ...after.components.web, version: '1.5.0' };
  after.routes = {
    public: {
      listen: '127.0.0.1:18080',
      to: 'web',
      shift: [
        {
          weight: 20,
          hold: '30s',
          analysis: { successRate: { min: 99 }, latency: { p99: { max: '500ms' } } },
        },
        { weight: 50, hold: 'manual' },
        { weight: 80, hold: '2m' },
        100,
      ],
    },
  };
  return buildPlan(layoutOf(before, 3), load(after));
}

describe('plans with progressive delivery', () => {
  it('render the steps as the topology writes them, never the model JSON, in text', () => {
    const text = renderPlanText(steppedPlan(), { style: plainStyle });
    golden('holds.plan.txt', text);
    expect(text).not.toMatch(/"hold":|30000|maxMs|\{…/);
    expect(text).toContain(
      '+ holds: 20 % for 30s (analysis: success ≥ 99 %, p99 ≤ 500ms), 50 % until promoted, 80 % for 2m',
    );
  });

  it('render them the same in the pull-request markdown', () => {
    const md = renderPlanMarkdown(steppedPlan());
    golden('holds.plan.md', md);
    expect(md).not.toMatch(/&quot;hold|"hold":|30000|maxMs|\{…/);
  });

  it('say the steps once in the cutover:shift action, uncut (logs and `migration show` print it)', () => {
    const shift = steppedPlan().actions.find((a) => a.id === 'cutover:shift');
    expect(shift?.reason).toBe(
      'shift 127.0.0.1:18080 to green web: 20 % for 30s (analysis: success ≥ 99 %, p99 ≤ 500ms), then 50 % until promoted, then 80 % for 2m, then 100 %; shift [100] → [20,50,80,100]',
    );
  });

  it('keep the model in the plan JSON (the contract), readable only in the views', () => {
    const route = steppedPlan().resources.find((r) => r.kind === 'route');
    const holds = route?.changes.find((c) => c.path === 'holds');
    expect(holds?.after).toEqual([
      expect.objectContaining({ weight: 20, hold: 30_000 }),
      { weight: 50, hold: 'manual' },
      { weight: 80, hold: 120_000 },
    ]);
    expect(route?.reason).toBe(
      'holds added (20 % for 30s (analysis: success ≥ 99 %, p99 ≤ 500ms), 50 % until promoted, 80 % for 2m), shift [100] → [20,50,80,100]',
    );
  });
});
