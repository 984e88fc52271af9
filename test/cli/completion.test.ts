/**
 * `cutover completion bash|zsh|fish`: the printed script, loaded by the real shell, completes
 * commands, subcommands, options and an option's choices from the program itself.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../support/cli.js';

const exec = promisify(execFile);
let dir: { dir: string; cleanup: () => Promise<void> } | undefined;
const scripts: Record<string, string> = {};

beforeAll(async () => {
  dir = await tempDir('cutover-completion-');
  for (const shell of ['bash', 'zsh', 'fish']) {
    const printed = await runCli(['completion', shell]);
    expect(printed.code, printed.stderr).toBe(0);
    scripts[shell] = path.join(dir.dir, `cutover.${shell}`);
    writeFileSync(scripts[shell] as string, printed.stdout);
  }
});
afterAll(() => dir?.cleanup());

/** What bash's completion function offers for a command line whose last word is being typed. */
async function bashOffers(...words: string[]): Promise<string[]> {
  const script = `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _cutover; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const { stdout } = await exec('bash', ['--norc', '-c', script, 'bash', scripts.bash as string, ...words]);
  return stdout.split('\n').filter(Boolean);
}

describe('cutover completion', () => {
  it('bash: commands, subcommands, options and an option’s choices', async () => {
    expect(await bashOffers('cutover', '')).toEqual([
      'topology',
      'server',
      'watch',
      'worker',
      'proxy',
      'completion',
    ]);
    expect(await bashOffers('cutover', 'topology', 'mi')).toEqual(['migrate', 'migration']);
    expect(await bashOffers('cutover', 'topology', 'migration', 'pro')).toEqual(['promote']);
    expect(await bashOffers('cutover', 'topology', 'plan', '-f', 'x.yaml', '--form')).toEqual(['--format']);
    expect(await bashOffers('cutover', 'topology', 'plan', '--format', '')).toEqual([
      'text',
      'json',
      'markdown',
    ]);
    // A value of its own (a file): left to the shell's file names (complete -o default).
    expect(await bashOffers('cutover', 'topology', 'plan', '-f', '')).toEqual([]);
    // Hidden commands stay hidden.
    expect(await bashOffers('cutover', 'inter')).toEqual([]);
  });

  it('zsh: the same completions through its bash layer (zsh filters them by what was typed)', async () => {
    const script = `autoload -U +X compinit && compinit -u -D; source "$1"; shift
emulate -L sh; setopt kshglob noshglob braceexpand
COMP_WORDS=("$@"); COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 )); _cutover; printf '%s\\n' "\${COMPREPLY[@]}"`;
    const offers = async (...words: string[]) =>
      (await exec('zsh', ['-f', '-c', script, 'zsh', scripts.zsh as string, ...words])).stdout
        .split('\n')
        .filter(Boolean);
    expect(await offers('cutover', 'topology', 'migration', '')).toContain('promote');
    expect(await offers('cutover', 'topology', 'plan', '--format', '')).toEqual(['text', 'json', 'markdown']);
  });

  it('fish: subcommands with their descriptions, and an option’s choices', async () => {
    const complete = async (line: string) =>
      (
        await exec('fish', [
          '--no-config',
          '-c',
          `source $argv[1]; complete -C $argv[2]`,
          scripts.fish as string,
          line,
        ])
      ).stdout;
    expect(await complete('cutover topology migration pro')).toMatch(
      /^promote\tmove a migration waiting at a shift step/,
    );
    expect(
      (await complete('cutover topology plan --format '))
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split('\t')[0]),
    ).toEqual(['json', 'markdown', 'text']);
    expect(await complete('cutover topology st')).toMatch(/^status\t/);
  });

  it('refuses a shell it does not know, naming the ones it does', async () => {
    const result = await runCli(['completion', 'tcsh']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /value 'tcsh' is invalid for argument 'shell'\. Allowed choices are bash, zsh, fish/,
    );
  });
});
