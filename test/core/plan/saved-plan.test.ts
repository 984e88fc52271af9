/**
 * A saved plan is told apart from anything else by `parseSavedPlan`: each refusal names the file
 * and what is wrong, and a saved plan reads back as it was written.
 */
import { describe, expect, it } from 'vitest';
import { emptyLayout } from '../../../core/layout.js';
import { buildPlan } from '../../../core/plan/build-plan.js';
import { parseSavedPlan, savedPlanOf, topologyDigest } from '../../../core/plan/saved-plan.js';
import { renderPlanJson } from '../../../views/render-plan-json.js';
import { load, shopDoc, toYaml } from '../../support/builders.js';

const text = toYaml(shopDoc());
const model = load(text);
const plan = buildPlan(emptyLayout('shop'), model);
const saved = savedPlanOf({
  plan,
  plannedAgainst: { kind: 'live', environment: 'shop', serial: 0, migrationId: null, recordedAt: null },
  topology: { file: 'topology.yaml', text },
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
      /^plan\.json is not a saved plan: not JSON \(it looks like a plan rendering, which a review shows; apply takes the JSON that `plan --out` saves\)/,
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
    // Edited after it was saved, each keeping the ids and digest it had:
    [
      JSON.stringify({ ...saved, topology: { ...saved.topology, text: text.replace('"15"', '"16"') } }),
      /topology\.text was edited after the plan was saved \(it is not the topology of digest sha256:[0-9a-f]{12}\)/,
    ],
    [
      JSON.stringify({ ...saved, topology: { ...saved.topology, text: 'components: [' } }),
      /topology\.text does not load \(topology\.yaml:\d+:\d+: YAML syntax: .*\)/,
    ],
    [
      JSON.stringify({ ...saved, plan: { ...plan, actions: plan.actions.slice(1) } }),
      /plan was edited after it was saved \(its content is not plan sha256:[0-9a-f]{12}\)/,
    ],
    [
      JSON.stringify({
        ...saved,
        baseSerial: -1,
        plan: { ...plan, baseSerial: -1 },
        plannedAgainst: { ...saved.plannedAgainst, serial: -1 },
      }),
      /baseSerial must be a whole number of 0 or more/,
    ],
    // An absurd value is named, not echoed whole.
    [JSON.stringify({ ...saved, formatVersion: '9'.repeat(100_000) }), /formatVersion "9{20}… is unknown/],
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
