/**
 * `cutover server --tokens-file`: the file is outside input, read like every YAML the project reads
 * (the bounded parser, so an alias bomb is refused before anything walks it), and a file that cannot
 * be used stops the server with one line naming the file, the line and column, and the cause. The
 * server is built in process (the CLI's own flag parsing and token reading); one refusal is the real
 * `cutover server` process, for its exit code and the line it prints.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ServerHarness } from '../support/server.js';

const harness = new ServerHarness();

afterAll(async () => {
  await harness.cleanup();
}, 60_000);

async function tokensFile(text: string): Promise<string> {
  const file = path.join(await harness.tempDir('cutover-tokens-'), 'tokens.yaml');
  await writeFile(file, text);
  return file;
}

/** The reason an in-process server with this --tokens-file does not start. */
async function refusedWith(file: string): Promise<string> {
  const error = await harness
    .startInProcess({ stateDir: await harness.stateDir(), args: ['--tokens-file', file] })
    .then(
      () => null,
      (e: unknown) => e as Error,
    );
  if (error === null) throw new Error(`a server started with --tokens-file ${file}`);
  return error.message;
}

/** What `cutover server --tokens-file <file>` prints as it refuses to start (a non-zero exit). */
async function processRefusedWith(file: string): Promise<string> {
  const refused = await harness.startRefused({
    stateDir: await harness.stateDir(),
    args: ['--tokens-file', file],
  });
  expect(refused.listening).toBe(false);
  expect(refused.code).not.toBe(0);
  expect(refused.code).not.toBeNull();
  return refused.stderr;
}

/** Nine levels of nine aliases: 9^9 (387 million) entries once expanded, from a few hundred bytes. */
function aliasBomb(): string {
  const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x]'];
  for (let i = 1; i <= 9; i++)
    lines.push(
      `a${i}: &a${i} [${Array(9)
        .fill(`*a${i - 1}`)
        .join(', ')}]`,
    );
  lines.push('tokens:', '  - { name: ci, role: operator, token: operator-token-8e1d2c3b4a5f6e7d }');
  lines.push('  - *a9');
  return `${lines.join('\n')}\n`;
}

describe('--tokens-file', () => {
  it('a tokens file whose aliases expand past the bound is refused, located, before it is walked', async () => {
    const file = await tokensFile(aliasBomb());
    const stderr = await refusedWith(file);
    expect(stderr).toContain(`${file}:`);
    expect(stderr).toMatch(/aliases expand to more than \d+ nodes/);
  }, 30_000);

  it('a YAML syntax error names the file, line and column', async () => {
    const file = await tokensFile('tokens:\n  - name: ci\n    role: [operator\n');
    const stderr = await refusedWith(file);
    expect(stderr).toMatch(
      new RegExp(`${file.replaceAll(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:\\d+:\\d+: YAML syntax`),
    );
  }, 30_000);

  it('a missing tokens file: one line naming it and what to check', async () => {
    const file = path.join(await harness.tempDir('cutover-tokens-'), 'absent.yaml');
    const stderr = await processRefusedWith(file);
    expect(stderr).toContain(`${file}: no such tokens file; check the path given to --tokens-file`);
  }, 30_000);

  it('a directory where the tokens file should be is a fault of the environment, not an internal error', async () => {
    const dir = await harness.tempDir('cutover-tokens-');
    const stderr = await refusedWith(dir);
    expect(stderr).toContain(
      `reading the tokens file ${dir}: a directory is where a file is expected (EISDIR)`,
    );
    expect(stderr).not.toMatch(/internal error/i);
  }, 30_000);

  it('a valid tokens file is read as before: the server starts with its tokens', async () => {
    const file = await tokensFile(
      'tokens:\n  - { name: ci, role: operator, token: operator-token-8e1d2c3b4a5f6e7d }\n',
    );
    const { api } = await harness.serveInProcess({ args: ['--tokens-file', file] });
    expect((await api.get('/v1/migrations')).status).toBe(401);
    const operator = await api.as('operator-token-8e1d2c3b4a5f6e7d').get('/v1/migrations');
    expect(operator.status).toBe(200);
  }, 30_000);
});
