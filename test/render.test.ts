import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { emptyLayout } from '../core/layout.js';
import { buildPlan } from '../core/plan/build-plan.js';
import type { PlannedAgainst } from '../core/plan/saved-plan.js';
import type { Plan } from '../core/plan/types.js';
import { renderPlanJson } from '../views/render-plan-json.js';
import { markdownLimitChars, renderPlanMarkdown } from '../views/render-plan-markdown.js';
import { renderPlanText } from '../views/render-plan-text.js';
import { colorStyle, plainStyle, styleFor } from '../views/style.js';
import { clone, layoutOf, load, shopDoc } from './support/builders.js';

/** Golden files: `UPDATE_GOLDEN=1 npx vitest run test/render.test.ts` rewrites them after a deliberate change. */
function golden(name: string, actual: string): void {
  const file = new URL(`./golden/${name}`, import.meta.url);
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(file, actual);
  expect(actual).toBe(readFileSync(file, 'utf8'));
}

function mixedPlan(): Plan {
  const before = shopDoc();
  before.components.legacy = { driver: 'apps', version: '1', run: { command: ['node', 'legacy.js'] } };
  before.routes = { ...before.routes, old: { listen: '127.0.0.1:18081', to: 'legacy' } };
  const after = clone(before);
  delete after.components.legacy;
  delete after.routes?.old;
  after.components.db = { ...after.components.db, version: '16' };
  after.components.cache = { driver: 'infra', version: '7.2', health: { tcp: {} } };
  after.components.mailer = { ...after.components.mailer, env: { SMTP_HOST: 'mail.internal' } };
  after.routes = {
    public: { listen: '127.0.0.1:18080', to: 'web', shift: [10, 50, 100], drain: { timeout: '1m' } },
  };
  after.strategy = { commit: 'manual' };
  return buildPlan(layoutOf(before, 7), load(after));
}

/** What mixedPlan was planned against, as a saved plan records it. */
const livePlannedAgainst: PlannedAgainst = {
  kind: 'live',
  environment: 'shop',
  serial: 7,
  migrationId: 'mig_01kbx4r8v2m3n4p5q6r7s8t9v0',
  recordedAt: '2026-11-24T10:15:00.000Z',
};

describe('rendering plans', () => {
  it('renders text like terraform plan', () => {
    golden('mixed.plan.txt', renderPlanText(mixedPlan(), { style: plainStyle, against: livePlannedAgainst }));
  });

  it('renders JSON matching the contract', () => {
    const json = renderPlanJson(mixedPlan());
    golden('mixed.plan.json', json);
    const parsed = JSON.parse(json);
    expect(Object.keys(parsed).slice(0, 5)).toEqual([
      'formatVersion',
      'environment',
      'planId',
      'baseSerial',
      'desiredDigest',
    ]);
  });

  it('renders markdown for a pull request comment', () => {
    golden('mixed.plan.md', renderPlanMarkdown(mixedPlan(), { against: livePlannedAgainst }));
  });

  it('says in words what a plan was planned against, never a bare "base serial 0"', () => {
    const header = (plan: Plan, against?: PlannedAgainst) => [
      renderPlanMarkdown(plan, against ? { against } : {}),
      renderPlanText(plan, { style: plainStyle, ...(against ? { against } : {}) }),
    ];
    for (const out of header(mixedPlan(), livePlannedAgainst)) {
      expect(out).toContain(
        'against the live layout of shop, serial 7, recorded by mig_01kbx4r8v2m3n4p5q6r7s8t9v0 on 2026-11-24',
      );
    }
    const first = buildPlan(emptyLayout('shop'), load(shopDoc()));
    for (const out of header(first)) {
      expect(out).toContain('against an empty environment (nothing migrated yet)');
      expect(out).not.toMatch(/base serial 0/);
    }
    for (const out of header(first, { kind: 'topology', source: 'topology.yaml@origin/main' })) {
      expect(out).toContain('against topology.yaml@origin/main');
      expect(out).not.toMatch(/base serial/);
    }
  });

  it('shows the commit mode and the bake time in every format, without changing the plan id', () => {
    const plan = mixedPlan();
    // The id of this plan before the strategy was shown: showing it must not move reviewed ids.
    // (It moved once, deliberately, when plan format 1.1 gave every action its `after` edges.)
    expect(plan.planId).toBe('sha256:4683354b4e44705f57a7c121e3c4bf2cf2616c00f0193709f38ffc3905ba8827');
    expect(JSON.parse(renderPlanJson(plan)).strategy).toEqual({ commit: 'manual', bake: '0s' });
    expect(renderPlanText(plan, { style: plainStyle })).toContain(
      'Strategy: commit manual (run `cutover topology migration commit` when it awaits), bake 0s.',
    );
    expect(renderPlanMarkdown(plan)).toContain('commit **manual**, bake **0s**');
    const doc = shopDoc();
    doc.strategy = { bake: '30s' };
    const unchanged = buildPlan(layoutOf(doc), load(doc));
    expect(unchanged.strategy).toEqual({ commit: 'auto', bake: '30s' });
    expect(renderPlanText(unchanged, { style: plainStyle })).toContain('Strategy: commit auto, bake 30s.');
    expect(renderPlanMarkdown(unchanged)).toContain('commit **auto**, bake **30s**');
  });

  it('renders "no changes" in every format', () => {
    const doc = shopDoc();
    const plan = buildPlan(layoutOf(doc), load(doc));
    expect(renderPlanText(plan, { style: plainStyle })).toContain('No changes.');
    expect(renderPlanMarkdown(plan)).toContain('**No changes.**');
  });

  it('keeps a huge plan under the comment limit and says what it left out', () => {
    const doc = shopDoc();
    doc.components = {};
    for (let i = 0; i < 3000; i++) {
      doc.components[`svc-${String(i).padStart(4, '0')}`] = {
        driver: 'infra',
        version: '1',
        env: { A: 'x'.repeat(40) },
      };
    }
    doc.routes = {};
    const after = clone(doc);
    for (const c of Object.values(after.components)) c.version = '2';
    const markdown = renderPlanMarkdown(buildPlan(layoutOf(doc), load(after)));
    expect(markdown.length).toBeLessThanOrEqual(markdownLimitChars);
    expect(markdown).toMatch(
      /This plan is too long for one comment: \d+ component and route sections are not shown/,
    );
    expect(
      markdown.startsWith(
        '### cutover plan for `shop`\n\n**Plan: 0 to add, 3000 to change, 0 to remove; 12000 actions.**',
      ),
    ).toBe(true);
  });

  it('escapes values so they cannot break the markdown table', () => {
    const before = shopDoc();
    const after = clone(before);
    after.components.mailer = { ...after.components.mailer, env: { NOTE: 'a | b <script>`x`' } };
    const markdown = renderPlanMarkdown(buildPlan(layoutOf(before), load(after)));
    expect(markdown).toContain('&quot;a &#124; b &lt;script&gt;&#96;x&#96;&quot;'.replace(/&quot;/g, '"'));
    expect(markdown).not.toContain('<script>');
  });

  it('uses colour only on a terminal and never with NO_COLOR', () => {
    expect(styleFor({ isTTY: true }, {})).toBe(colorStyle);
    expect(styleFor({ isTTY: true }, { NO_COLOR: '1' })).toBe(plainStyle);
    expect(styleFor({ isTTY: false }, {})).toBe(plainStyle);
    expect(renderPlanText(mixedPlan(), { style: colorStyle })).toContain('\u001b[32m+\u001b[39m');
  });
});
