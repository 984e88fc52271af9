/**
 * Issue 30 item 5: the local mode is one machine, the host `local`. A topology placing a driver on
 * another host is refused by plan and migrate with one line naming the file, line and field, and
 * nothing runs; `runsOn: local` runs as a topology without hosts.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { type Workspace, workspace } from '../support/migrations.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function placedOn(host: string): Promise<Workspace> {
  const w = await workspace('examples/exec-demo');
  cleanups.push(w.cleanup);
  const text = readFileSync(w.file, 'utf8').replace('    type: exec', `    type: exec\n    runsOn: ${host}`);
  writeFileSync(w.file, text);
  return w;
}

/** The 1-based line of the first occurrence of `needle`. */
function lineOf(source: string, needle: string): number {
  return source.slice(0, source.indexOf(needle)).split('\n').length;
}

describe('the local mode and hosts', () => {
  it('refuses a host other than local: one line with file, line and field; nothing is created', async () => {
    const w = await placedOn('b');
    const line = lineOf(readFileSync(w.file, 'utf8'), 'runsOn: b');
    for (const args of [
      ['topology', 'plan'],
      ['topology', 'migrate', '--yes'],
    ]) {
      const result = await runCli([...args, '-f', w.file]);
      expect(result.code, result.stdout).toBe(1);
      const lines = result.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        new RegExp(
          `topology\\.yaml:${line}:\\d+ drivers\\.infra\\.runsOn: host b: the local mode runs every call on this machine \\(host local\\); run it on Temporal \\(WORKFLOW_HOST\\) with \`cutover worker --host b\` on that machine$`,
        ),
      );
    }
    const list = await runCli(['topology', 'migration', 'list', '-f', w.file, '--json']);
    expect(JSON.parse(list.stdout).items).toEqual([]);
  });

  it('runs runsOn: local as it runs a topology without hosts, and the plan says where', async () => {
    const w = await placedOn('local');
    const plan = await runCli(['topology', 'plan', '-f', w.file]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain('Hosts: component api on local, component db on local.');
    const done = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(done.code, done.stderr).toBe(0);
  });
});
