/**
 * `npm run bench:quick` as part of the tests (issue 27): the benches whose goals are ratios of two
 * figures measured side by side in one run (plan: diff + plan against parse + validate, and the
 * CLI's plan against its validate; router: against nginx; parallel: against the critical path).
 * A goal missed beyond its wide margin (a regression, not noise) fails the bench, and so this test;
 * the tables are printed whole.
 *
 * It used to run after vitest, ~30 s on its own; as a test file it runs last
 * (test/support/sequencer.ts, `runLast`) and shares the cores with the run's last files. Its ratio
 * figures are measured side by side under the same load.
 */
import { spawn } from 'node:child_process';
import { expect, it } from 'vitest';
import { repoRoot } from './support/cli.js';

it('the benches whose goals are ratios run to their end, no goal missed by a wide margin', {
  timeout: 300_000,
}, async () => {
  const child = spawn(
    process.execPath,
    ['bench/run.js', '--quick', '--ratios', 'plan', 'router', 'parallel'],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  console.log(output);
  expect(code, output.split('\n').slice(-30).join('\n')).toBe(0);
  expect(output).toMatch(/^router: /m);
  expect(output).toMatch(/results: bench\/results\/plan\.json/);
  expect(output).toMatch(/results: bench\/results\/parallel\.json/);
});
