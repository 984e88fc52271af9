/**
 * The tutorial page (docs/getting-started.md) as a newcomer runs it (issue 29): its own files and
 * shell blocks, in order, in a fresh home directory with `cutover` on the PATH, through bash, the
 * real CLI, real app processes behind the real router and a real Git repository. Only what a test
 * cannot do as a person would is changed: the route's port (a free one, not 8090), the timed hold
 * (2s, not 30s), the `curl` loop (requests from the test, counted), `migration logs --follow` (read
 * once: the migration waits for a promotion by then), and of "promote or roll back" only promote.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { repoRoot, tempDir } from './support/cli.js';
import { gitEnv } from './support/git.js';
import { freePort, killRunners, killSlots } from './support/migrations.js';
import { eventually } from './support/wait.js';

const page = readFileSync(path.join(repoRoot, 'docs', 'getting-started.md'), 'utf8');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Block {
  lang: string;
  text: string;
}

/** The page's fenced blocks, in order. */
function blocks(markdown: string): Block[] {
  return [...markdown.matchAll(/^```(\w*)[^\n]*\n([\s\S]*?)^```$/gm)].map((m) => ({
    lang: m[1] as string,
    text: m[2] as string,
  }));
}

interface Shell {
  code: number;
  out: string;
}

/** Requests to the route every 50 ms, as the page's `curl` loop sends them, counted. */
function trafficLoop(url: string): { stop: () => Promise<{ failed: number; bodies: string[] }> } {
  let running = true;
  let failed = 0;
  const bodies: string[] = [];
  const loop = (async () => {
    while (running) {
      try {
        const response = await fetch(url);
        const body = await response.text();
        if (response.ok) bodies.push(body);
        else failed += 1;
      } catch {
        failed += 1;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { failed, bodies };
    },
  };
}

it('runs as written: own app, first deployment, a stepped shift with a hold, a manual hold, rollback --to, down', {
  timeout: 180_000,
}, async () => {
  const home = await tempDir('cutover-tutorial-');
  const bin = path.join(home.dir, '.bin');
  const app = path.join(home.dir, 'hello');
  const stateDir = path.join(app, '.cutover');
  cleanups.push(home.cleanup, async () => {
    killSlots(stateDir);
    killRunners(stateDir);
  });
  mkdirSync(bin);
  writeFileSync(
    path.join(bin, 'cutover'),
    `#!/bin/sh\nexec "${process.execPath}" "${path.join(repoRoot, 'bin', 'cutover.js')}" "$@"\n`,
    { mode: 0o755 },
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  const local = (text: string) =>
    text.replaceAll('127.0.0.1:8090', `127.0.0.1:${port}`).replace('hold: 30s', 'hold: 2s');
  let migrationId = '';
  const sh = (script: string) =>
    new Promise<Shell>((resolve) => {
      execFile(
        'bash',
        ['-euo', 'pipefail', '-c', script],
        {
          cwd: home.dir,
          env: { ...gitEnv, HOME: home.dir, NO_COLOR: '1', PATH: `${bin}:${process.env.PATH ?? ''}` },
          timeout: 60_000,
        },
        (error, stdout, stderr) =>
          resolve({
            code: error ? (typeof error.code === 'number' ? error.code : 1) : 0,
            out: stdout + stderr,
          }),
      );
    });
  cleanups.unshift(async () => {
    await sh('cd ~/hello && cutover topology down --yes');
  });

  const all = blocks(page);
  const outputs: string[] = [];
  let traffic: ReturnType<typeof trafficLoop> | undefined;
  let yamlSeen = 0;
  let reverted = false;
  for (const block of all) {
    if (block.lang === 'yaml') {
      yamlSeen += 1;
      const file = path.join(app, 'topology.yaml');
      if (yamlSeen === 1) writeFileSync(file, local(block.text));
      else {
        // "Make the first step wait for you": the snippet replaces the route's shift.
        const before = readFileSync(file, 'utf8');
        const shift = /^ {4}shift:\n(?: {6}.*\n)+/m;
        expect(before).toMatch(shift);
        writeFileSync(file, before.replace(shift, block.text));
      }
      continue;
    }
    if (block.lang !== 'sh') continue;
    if (/npm ci|alias cutover/.test(block.text)) continue; // installing: the test's PATH has it
    if (block.text.includes('while true')) {
      traffic = trafficLoop(url);
      continue;
    }
    let script = local(block.text);
    if (script.includes('migration promote')) {
      script = script
        .split('\n')
        .filter((line) => !line.includes('migration rollback'))
        .join('\n');
      await eventually(
        async () =>
          (await sh('cd ~/hello && cutover topology migration list')).out.includes('awaiting promotion'),
        60_000,
      );
    }
    if (script.includes('rollback --to')) {
      // "After a commit": as the reader, once the list says the promoted migration completed (ci41, on
      // a loaded machine: it was still committing, and `rollback --to` was refused).
      await eventually(async () => {
        const list = (await sh('cd ~/hello && cutover topology migration list')).out;
        return list.includes(migrationId) && list.includes('completed');
      }, 60_000);
    }
    // A command a line, as typed (a block with a here-document at once): the id a line prints is
    // what the next line's `mig_…` stands for.
    const commands = script.includes('<<') ? [script] : script.split('\n').filter((l) => l.trim() !== '');
    for (const command of commands) {
      const line = command.replaceAll('mig_…', migrationId).replace(' --follow', '');
      const run = await sh(line.startsWith('mkdir') ? line : `cd ~/hello\n${line}`);
      expect(run.code, `${line}\n${run.out}`).toBe(0);
      outputs.push(run.out);
      const detached = /^(mig_[0-9a-z]+)$/m.exec(run.out);
      if (line.includes('--detach') && detached) migrationId = detached[1] as string;
      if (line.startsWith('git revert')) {
        // Back by rollback --to, the file reverted in Git: the file and the layout agree.
        const plan = await sh('cd ~/hello && cutover topology plan --detailed-exitcode');
        expect(plan.code, plan.out).toBe(0);
        expect(plan.out).toContain('No changes.');
        reverted = true;
      }
    }
    if (traffic && script.includes('migrate --yes')) {
      const { failed, bodies } = await traffic.stop();
      traffic = undefined;
      expect(failed, 'requests that failed during the shift').toBe(0);
      expect(bodies.some((b) => b.startsWith('hello from 1.0.0'))).toBe(true);
      expect(bodies.some((b) => b.startsWith('hello from 2.0.0'))).toBe(true);
    }
  }
  const text = outputs.join('\n');
  // What the page says each step shows.
  expect(text).toContain('+ component web will be added');
  expect(text).toMatch(/hello from 1\.0\.0 \(pid \d+\)/);
  expect(text).toMatch(/web +1\.0\.0 +slot blue +2\/2 running/);
  expect(text).toContain('-/+ component web will be replaced green-blue');
  expect(text).toMatch(/hold: \ds left of 2s/);
  expect(migrationId).toMatch(/^mig_/);
  expect(text).toContain('stopped the router');
  expect(reverted, 'the page goes back with rollback --to and git revert').toBe(true);
  // Stopped at the end: nothing answers on the route any more.
  await expect(fetch(url)).rejects.toThrow();
});
