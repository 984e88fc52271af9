import { describe, expect, it } from 'vitest';
import { summaryOf } from '../../core/migration/summary.js';
import { renderMigration } from '../../views/render-migration.js';
import { plainStyle } from '../../views/style.js';
import { Driver, holdSpec } from '../support/migration-builders.js';

describe('migration show with analyses', () => {
  it('lists each hold analysis with its step, verdict and figures; the summary carries the last', () => {
    const d = new Driver(
      holdSpec([{ weight: 10, hold: '30s', analysis: { successRate: { min: 99 } } }, 50, 100]),
    );
    const reason = 'green 5xx 4.2 % > 1 % over 512 requests at the 10 % step';
    d.analysisOf = () => ({
      outcome: 'breach',
      reason,
      routes: [{ route: 'public', outcome: 'breach', reason }],
    });
    d.run();
    const summary = summaryOf(d.state);
    expect(summary.analysis).toEqual({ outcome: 'breach', weight: 10, reason });
    const text = renderMigration(summary, d.state, plainStyle);
    expect(text).toContain(`Analyses:\n  ✗ 10 %   breach       ${reason}`);
    expect(text).toContain('status:    rolled back');
  });
});
