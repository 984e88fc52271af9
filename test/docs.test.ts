/**
 * The documentation (README.md and docs/) against what it describes:
 *
 * - the reference pages (docs/reference/) are what scripts/docs-reference.mjs makes now from the
 *   schema, the commands' `--help` and the server's OpenAPI document (regenerated in memory, from
 *   the sources);
 * - the CLI guide's synopsis names every command and every option the commands have;
 * - every relative link and anchor resolves;
 * - every shell block marked runnable (```sh runnable) runs in the repository, with `cutover` on
 *   the PATH, and exits 0 (a process each: keep them few and quick).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../cli/main.js';
import { StateDir } from '../engine/store/state-dir.js';
import { generatedPages, openApiDocument } from '../scripts/docs-reference.mjs';
import { buildServer } from '../server/app.js';
import { repoRoot, tempDir } from './support/cli.js';

/** README.md and every page under docs/, by path relative to the repository. */
function docPages(): string[] {
  const pages = ['README.md'];
  const walk = (dir: string) => {
    for (const name of readdirSync(path.join(repoRoot, dir)).sort()) {
      const rel = path.join(dir, name);
      if (statSync(path.join(repoRoot, rel)).isDirectory()) walk(rel);
      else if (name.endsWith('.md')) pages.push(rel);
    }
  };
  walk('docs');
  return pages;
}

const read = (rel: string) => readFileSync(path.join(repoRoot, rel), 'utf8');

/** The text outside fenced code blocks and inline code, where links are links. */
function prose(markdown: string): string {
  return markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors a page's headings make (a repeated heading gets -1, -2…). */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const text = markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
  for (const match of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(match[1] as string);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

describe('the reference pages', () => {
  let pages: Record<string, string>;
  beforeAll(async () => {
    const openapi = await openApiDocument({ buildServer: buildServer as never, StateDir });
    pages = await generatedPages({ main, openapi });
  });

  it('are what `npm run docs` makes from the schema, the commands and the OpenAPI document', () => {
    for (const [file, text] of Object.entries(pages)) {
      const onDisk = existsSync(path.join(repoRoot, file)) ? read(file) : '(missing)';
      expect(onDisk, `${file} is out of date: run \`npm run docs\``).toBe(text);
    }
  });

  it("list every command, and the CLI guide's synopsis names each with all its options", () => {
    const reference = pages['docs/reference/cli.md'] as string;
    const synopsis = /^```\n(cutover topology validate[\s\S]*?)^```$/m.exec(read('docs/cli.md'))?.[1] ?? '';
    // Each command's entry: its line(s) in the synopsis, up to the next `cutover …` line.
    const entries = new Map<string, string>();
    let current = '';
    for (const line of synopsis.split('\n')) {
      const named = /^cutover ((?:[a-z-]+ ?)+?)(?= [<[-]|\s*$| SAVED| --| \()/.exec(line);
      if (named) current = (named[1] as string).trim();
      entries.set(current, `${entries.get(current) ?? ''}\n${line}`);
    }
    const commands = [...reference.matchAll(/^## cutover (.+)$/gm)].map((m) => m[1] as string);
    expect(commands).toContain('topology migration promote');
    const shared = new Set(['--server', '--file', '--state-dir', '--help', '--version']);
    const missing: string[] = [];
    for (const command of commands) {
      if (command === 'topology' || command === 'topology migration') continue;
      const entry = entries.get(command);
      if (entry === undefined) {
        missing.push(`${command}: not in the synopsis`);
        continue;
      }
      const help = reference.slice(reference.indexOf(`## cutover ${command}\n`));
      const options = help.slice(help.indexOf('Options:'), help.indexOf('```', help.indexOf('Options:')));
      for (const option of options.matchAll(/^ {2}(?:-\w, )?(--[a-z-]+)/gm)) {
        const name = option[1] as string;
        if (!shared.has(name) && !entry.includes(name.replace(/^--no-/, '--no-'))) {
          missing.push(`${command}: ${name}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });
});

describe('links', () => {
  it('every relative link and anchor in README.md and docs/ resolves', () => {
    const broken: string[] = [];
    for (const page of docPages()) {
      const text = read(page);
      for (const match of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1] as string;
        if (/^[a-z]+:/.test(target)) continue;
        const [file = '', anchor] = target.split('#');
        const resolved = file === '' ? page : path.normalize(path.join(path.dirname(page), file));
        if (!existsSync(path.join(repoRoot, resolved))) {
          broken.push(`${page}: ${target} (no ${resolved})`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith('.md') && !anchorsOf(read(resolved)).has(anchor)) {
          broken.push(`${page}: ${target} (no heading #${anchor} in ${resolved})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});

/** Every ```sh runnable block: its page and its text. */
function runnableBlocks(): { page: string; script: string }[] {
  return docPages().flatMap((page) =>
    [...read(page).matchAll(/^```sh runnable\n([\s\S]*?)^```$/gm)].map((m) => ({
      page,
      script: m[1] as string,
    })),
  );
}

describe('runnable shell blocks', () => {
  let bin: { dir: string; cleanup: () => Promise<void> };
  beforeAll(async () => {
    bin = await tempDir('cutover-docs-bin-');
    // `cutover` as a user has it after `npm link`: the package's bin.
    mkdirSync(bin.dir, { recursive: true });
    writeFileSync(
      path.join(bin.dir, 'cutover'),
      `#!/bin/sh\nexec "${process.execPath}" "${path.join(repoRoot, 'bin', 'cutover.js')}" "$@"\n`,
      { mode: 0o755 },
    );
  });
  afterAll(async () => {
    await bin?.cleanup();
  });

  const blocks = runnableBlocks();
  it('there are some, and few', () => {
    expect(blocks.length).toBeGreaterThan(0);
    expect(blocks.length).toBeLessThanOrEqual(8);
  });

  it.concurrent.each(blocks.map((b, i) => [`${b.page} #${i + 1}`, b] as const))(
    '%s runs and exits 0',
    async (_name, { script }) => {
      const result = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        execFile(
          'bash',
          ['-euo', 'pipefail', '-c', script],
          {
            cwd: repoRoot,
            env: { ...process.env, NO_COLOR: '1', PATH: `${bin.dir}:${process.env.PATH ?? ''}` },
            timeout: 30_000,
          },
          (error, stdout, stderr) =>
            resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
        );
      });
      expect(result.code, `${script}\n${result.stdout}${result.stderr}`).toBe(0);
    },
  );
});
