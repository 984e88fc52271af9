/**
 * `migration show` of a migration run with `migrate` from a clean checkout, no commit given: the
 * checkout's HEAD is known (applied), and a line `commit: unknown` beside it read to a newcomer as
 * if cutover could not tell which commit ran (issue 29, tried with an own app in a Git repository).
 */
import { expect, it } from 'vitest';
import { summaryOf } from '../../core/migration/summary.js';
import { renderMigration } from '../../views/render-migration.js';
import { plainStyle } from '../../views/style.js';
import { Driver, holdSpec } from '../support/migration-builders.js';

const head = '64cf55148843854c8dba6c911500b7453f77e756';

function completed(): Driver {
  const d = new Driver(holdSpec([{ weight: 20, hold: '30s' }, 100]));
  d.run();
  return d;
}

it('says which commit was applied, and no "commit: unknown" beside it', () => {
  const d = completed();
  const text = renderMigration({ ...summaryOf(d.state), appliedCommit: head }, d.state, plainStyle);
  expect(text).toContain(`  applied:   ${head} (HEAD of the checkout applied from)\n`);
  expect(text).not.toContain('commit:    unknown');
});

it('still says "unknown" when neither a commit nor the checkout is known', () => {
  const d = completed();
  const text = renderMigration({ ...summaryOf(d.state), appliedCommit: null }, d.state, plainStyle);
  expect(text).toContain('  commit:    unknown\n');
});

it('shows a given commit beside the applied one', () => {
  const d = completed();
  const summary = {
    ...summaryOf(d.state),
    commit: 'a'.repeat(40),
    commitFrom: 'option' as const,
    appliedCommit: head,
  };
  const text = renderMigration(summary, d.state, plainStyle);
  expect(text).toContain(`  commit:    ${'a'.repeat(40)} (given: migrate --commit)\n`);
  expect(text).toContain(`  applied:   ${head}`);
});
