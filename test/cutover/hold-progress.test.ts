/**
 * A timed hold says how it goes (issue 29, item 7): `migrate` in plain mode (not a terminal), the
 * real CLI, real app processes behind the real router. Before, `hold: 2m` was two minutes of silence.
 */
import { afterEach, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { liveWorkspace, setFileVersion, type Workspace } from '../support/migrations.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const w of spaces.splice(0)) await w.cleanup();
});

it('prints the time left of a hold as it goes, a few lines, not a flood', { timeout: 90_000 }, async () => {
  const w = await liveWorkspace((yaml) =>
    yaml.replace(/shift: .*/, 'shift: [{ weight: 50, hold: 4s }, 100]'),
  );
  spaces.push(w);
  expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
  setFileVersion(w, '1.0.0', '2.0.0');
  const run = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(run.code, run.stderr).toBe(0);
  const countdown = run.stderr.match(/hold: \ds left of 4s/g) ?? [];
  expect(countdown, run.stderr).toEqual([
    'hold: 3s left of 4s',
    'hold: 2s left of 4s',
    'hold: 1s left of 4s',
  ]);
});
