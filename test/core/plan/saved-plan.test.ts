/**
 * A saved plan is told apart from anything else by `parseSavedPlan`: each refusal names the file
 * and what is wrong, and a saved plan reads back as it was written.
 */
import { describe, expect, it } from 'vitest';
import { emptyLayout } from '../../../core/layout.js';
import { buildPlan } from '../../../core/plan/build-plan.js';
import { parseSavedPlan, savedPlanOf, topologyDigest } from '../../../core/plan/saved-plan.js';
import { renderPlanJson } from '../../../views/render-plan-json.js';
import { load, shopDoc } from '../../support/builders.js';

const model = load(shopDoc());
const plan = buildPlan(emptyLayout('shop'), model);
const saved = savedPlanOf({
  plan,
  plannedAgainst: { kind: 'live', environment: 'shop', serial: 0, migrationId: null, recordedAt: null },
  topology: { file: 'topology.yaml', text: 'metadata: {name: shop}\n' },
  commit: null,
  createdAt: '2026-11-25T00:00:00.000Z',
});

describe('parseSavedPlan', () => {
  it('reads back a saved plan, whose digest is the normalised topology’s', () => {
    expect(parseSavedPlan(JSON.stringify(saved), 'plan.json')).toEqual(saved);
    expect(saved.digest).toBe(topologyDigest(model));
  });

  it.each([
    [
      '### cutover plan for `shop`',
      /^plan\.json is not a saved plan: not JSON \(it looks like a plan rendering\)/,
    ],
    [
      renderPlanJson(plan),
      /it is a plan rendering \(plan --format json\), not a saved plan: save one with --out/,
    ],
    [JSON.stringify({ ...saved, formatVersion: 7 }), /formatVersion 7 is unknown \(this cutover reads 1\)/],
    [JSON.stringify({ ...saved, kind: 'Topology' }), /kind is "Topology", not "cutover\/SavedPlan"/],
    [
      JSON.stringify({ ...saved, digest: 'sha256:00' }),
      /digest is missing or is not the plan's desiredDigest/,
    ],
    [JSON.stringify({ ...saved, baseSerial: 3 }), /baseSerial is not the plan's baseSerial/],
    ['[]', /not a JSON object/],
  ])('refuses %#, naming the file and what is wrong', (text, message) => {
    let error: unknown;
    try {
      parseSavedPlan(text, 'plan.json');
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: 'PLAN_INVALID' });
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).toMatch(
      /^plan\.json is not a saved plan: .*make one with `cutover topology plan --out plan\.json`$/,
    );
  });
});
