import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { summaryOf } from '../../core/migration/summary.js';
import { detailJson } from '../../views/migration-json.js';
import { renderMigration, renderMigrationList } from '../../views/render-migration.js';
import { plainStyle } from '../../views/style.js';
import { Driver, holdSpec } from '../support/migration-builders.js';

/** Golden files: `UPDATE_GOLDEN=1 npx vitest run test/views/render-undone.test.ts` rewrites them. */
function golden(name: string, actual: string): void {
  const file = new URL(`../golden/${name}`, import.meta.url);
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(file, actual);
  expect(actual).toBe(readFileSync(file, 'utf8'));
}

const reason = 'green 5xx 4.2 % > 1 % over 512 requests at the 10 % step';

/** A migration whose analysis at 10 % breached: the shift was running when it rolled back. */
function breached(): Driver {
  const d = new Driver(
    holdSpec([{ weight: 10, hold: '30s', analysis: { successRate: { min: 99 } } }, 50, 100]),
  );
  d.analysisOf = () => ({
    outcome: 'breach',
    reason,
    routes: [{ route: 'public', outcome: 'breach', reason }],
  });
  d.run();
  return d;
}

describe('a rolled-back migration says what ran, what was undone, and why, in every view', () => {
  it('show: the reason in the status; each action ran and undone, stopped and undone, or not run', () => {
    const d = breached();
    const text = renderMigration(summaryOf(d.state), d.state, plainStyle);
    golden('rolled-back.show.txt', text);
    // The shift ran (its analysis measured 10 % of the traffic) and was undone: never `·`.
    expect(text).toMatch(/↺ cutover:shift +stopped, undone/);
    expect(text).toContain(`status:    rolled back: analysis failed: ${reason}`);
  });

  it('list: "rolled back: <reason>", as "failed: <reason>"', () => {
    const d = breached();
    expect(summaryOf(d.state).status).toBe(`rolled back: analysis failed: ${reason}`);
    expect(renderMigrationList([summaryOf(d.state)], plainStyle)).toContain(
      'rolled back: analysis failed: green',
    );
  });

  it('--json and the API: the same outcome per action, beside the summary and the state', () => {
    const d = breached();
    const json = detailJson({ summary: summaryOf(d.state), state: d.state });
    expect(json.actions.map((a) => `${a.id} ${a.outcome}`)).toEqual([
      'provision_green:api undone',
      'provision_green:web undone',
      'health_gate:api undone',
      'health_gate:web undone',
      'cutover:shift stopped',
      'drain_blue:web not_run',
      'drain_blue:api not_run',
      'commit:web not_run',
      'commit:api not_run',
    ]);
    expect(json.summary.reason).toBe(`analysis failed: ${reason}`);
  });

  it('a completed migration reads as before: every action done, no outcome column', () => {
    const d = new Driver(holdSpec([10, 100]));
    d.run();
    const text = renderMigration(summaryOf(d.state), d.state, plainStyle);
    expect(text).toContain('status:    completed');
    expect(text).toMatch(/✓ cutover:shift +shift/);
    expect(
      detailJson({ summary: summaryOf(d.state), state: d.state }).actions.every((a) => a.outcome === 'done'),
    ).toBe(true);
  });
});
