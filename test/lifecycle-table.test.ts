import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Lifecycle, Verb } from '../core/migration/types.js';
import { verbs } from '../core/migration/types.js';
import { lifecycleTransitions, verbTable } from '../core/migration/verb-policy.js';
import { repoRoot } from './support/cli.js';
import { bumpSpec, Driver, holdSpec } from './support/migration-builders.js';

const everyHookPoint = Object.fromEntries(
  ['preRollout', 'rollout', 'confirmPromotion', 'postRollout'].map((point) => [
    point,
    [{ name: point.toLowerCase(), command: ['true'] }],
  ]),
);

/** The page that shows the lifecycle (docs/migrating.md, "Lifecycle"). */
const page = readFileSync(path.join(repoRoot, 'docs', 'migrating.md'), 'utf8');

function renderTransitionTable(): string {
  const rows = lifecycleTransitions.map((t) => `| \`${t.from}\` | \`${t.to}\` | ${t.on} |`);
  return ['| from | to | on |', '| --- | --- | --- |', ...rows].join('\n');
}

function renderVerbTable(): string {
  const rows = (Object.keys(verbTable) as Lifecycle[]).map(
    (state) =>
      `| \`${state}\` | ${verbs.map((verb) => (verbTable[state][verb] === null ? 'yes' : `no: ${verbTable[state][verb]}`)).join(' | ')} |`,
  );
  return [`| state | ${verbs.join(' | ')} |`, `| --- |${verbs.map(() => ' --- |').join('')}`, ...rows].join(
    '\n',
  );
}

describe('the lifecycle table', () => {
  it('is shown in docs/migrating.md exactly as the code has it', () => {
    expect(page).toContain(renderTransitionTable());
    expect(page).toContain(renderVerbTable());
  });

  it('lists every change of state the step function makes', () => {
    const allowed = new Set(lifecycleTransitions.map((t) => `${t.from}>${t.to}`));
    const move = fc.oneof(
      fc.constantFrom<Verb>(...verbs).map((verb) => ({ verb })),
      fc
        .constantFrom<'ok' | 'fail' | 'fail-permanent' | 'cancelled'>(
          'ok',
          'ok',
          'ok',
          'fail',
          'fail-permanent',
          'cancelled',
        )
        .map((outcome) => ({ outcome })),
    );
    fc.assert(
      fc.property(
        fc.constantFrom<'auto' | 'manual' | 'holds'>('auto', 'manual', 'holds'),
        fc.array(move, { maxLength: 60 }),
        (commit, moves) => {
          // holds: a manual hold, a hold with analysis and hooks at every point, on top of the plan.
          const d = new Driver(
            commit === 'holds'
              ? holdSpec(
                  [
                    { weight: 10, hold: 'manual' },
                    { weight: 50, hold: '1s', analysis: { successRate: { min: 99 } } },
                    100,
                  ],
                  { hooks: everyHookPoint },
                )
              : bumpSpec(commit, commit === 'auto' ? '5s' : '0s'),
          );
          for (const m of moves) {
            const before = d.state.lifecycle;
            if ('verb' in m) d.verb(m.verb);
            else d.complete(() => m.outcome);
            const after = d.state.lifecycle;
            if (before !== after) expect(allowed, `${before} → ${after}`).toContain(`${before}>${after}`);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
