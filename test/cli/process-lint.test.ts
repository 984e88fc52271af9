/**
 * Commands take their streams (cli/context.ts): the biome rule lint/cli-process-streams.grit, which
 * `npm run lint` runs, refuses `process.stdout`, `stderr`, `stdin`, `exitCode`, `env` and `cwd` in
 * cli/ outside cli/wire-process.ts. Shown on a small tree in a temporary directory, never on the real one.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';

const run = promisify(execFile);
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

it('refuses the process streams, exit code, environment and directory in cli/ outside the wiring', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'cutover-lint-'));
  dirs.push(dir);
  for (const sub of ['cli', 'lint', 'test']) mkdirSync(path.join(dir, sub));
  copyFileSync(path.join(repoRoot, 'biome.json'), path.join(dir, 'biome.json'));
  copyFileSync(
    path.join(repoRoot, 'lint', 'cli-process-streams.grit'),
    path.join(dir, 'lint', 'cli-process-streams.grit'),
  );
  const uses = 'export const uses = [process.stdout, process.exitCode, process.env.HOME, process.cwd()];\n';
  writeFileSync(path.join(dir, 'cli', 'command.ts'), uses);
  writeFileSync(path.join(dir, 'cli', 'wire-process.ts'), uses);
  writeFileSync(path.join(dir, 'test', 'command.test.ts'), uses);
  // Exit status 1 means diagnostics: read the report either way.
  const { stdout } = await run(
    path.join(repoRoot, 'node_modules', '.bin', 'biome'),
    ['lint', '--vcs-enabled=false', '--reporter=json', '.'],
    { cwd: dir },
  ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
  const report = JSON.parse(stdout) as {
    diagnostics: { category: string; location: { path: string; start: { column: number } } }[];
  };
  const found = report.diagnostics
    .filter((d) => d.category === 'plugin')
    .map((d) => `${d.location.path}:${d.location.start.column}`);
  expect(found.sort()).toEqual([
    'cli/command.ts:30',
    'cli/command.ts:46',
    'cli/command.ts:64',
    'cli/command.ts:82',
  ]);
});
