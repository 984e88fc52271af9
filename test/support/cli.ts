import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const bin = path.join(repoRoot, 'bin', 'cutover.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the real CLI (the compiled bin, as a user would) in a child process. */
export function runCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<CliResult> {
  if (!existsSync(path.join(repoRoot, 'dist', 'cli', 'main.js'))) {
    throw new Error('dist/ is missing: run `npm run build` (npm test does it) before the CLI tests');
  }
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      {
        cwd: options.cwd ?? repoRoot,
        env: { ...process.env, NO_COLOR: '1', ...options.env },
        timeout: 30_000,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A temporary directory that the returned cleanup removes; tests call it in afterEach. */
export async function tempDir(
  prefix = 'cutover-test-',
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}
