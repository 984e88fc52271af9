/**
 * What the CLI tells a user about a migration's end (issue 18, "a truthful surface"): the manual
 * commit's hint and its JSON return, and the commit's log saying green was promoted.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from './support/cli.js';
import { releaseGate, show, type Workspace, waitFor, workspace } from './support/migrations.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const w of spaces.splice(0)) await w.cleanup();
});

async function ws(edit?: (yaml: string) => string): Promise<Workspace> {
  const w = await workspace(undefined, edit);
  spaces.push(w);
  return w;
}

interface LogLineJson {
  kind: string;
  message: string;
}

const logLines = async (w: Workspace, id: string): Promise<LogLineJson[]> =>
  (await runCli(['topology', 'migration', 'logs', id, '-f', w.file, '--json'])).stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as LogLineJson);

describe('a manual commit, seen from the CLI', () => {
  it('migrate --json returns at awaiting_commit with the summary and says how to commit; the commit log says green was promoted', async () => {
    const w = await ws((y) => y.replace('commit: auto', 'commit: manual'));
    releaseGate(w);
    const migrate = await runCli(['topology', 'migrate', '-f', w.file, '--yes', '--json']);
    expect(migrate.code).toBe(0);
    const printed = JSON.parse(migrate.stdout) as { summary: { id: string; lifecycle: string } };
    const { id } = printed.summary;
    expect(printed.summary.lifecycle).toBe('awaiting_commit');
    expect(migrate.stderr).toContain(
      `awaiting commit: run \`cutover topology migration commit ${id} -f ${w.file}\``,
    );
    // It goes on without this process, waiting for the commit.
    expect((await show(w, id)).lifecycle).toBe('awaiting_commit');

    const commit = await runCli(['topology', 'migration', 'commit', id, '-f', w.file]);
    expect(commit.code).toBe(0);
    const messages = (await logLines(w, id)).map((l) => l.message);
    expect(messages).toContain('route web: green (1) promoted; 100% on it');
    expect(messages.filter((m) => m.includes('100% blue'))).toEqual([]);
  });

  it('a foreground migrate without --json prints the hint and waits for the commit from another terminal', async () => {
    const w = await ws((y) => y.replace('commit: auto', 'commit: manual'));
    releaseGate(w);
    const migrate = runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    const listed = async () =>
      (
        JSON.parse((await runCli(['topology', 'migration', 'list', '-f', w.file, '--json'])).stdout) as {
          items: { id: string }[];
        }
      ).items;
    let id = '';
    const deadline = Date.now() + 20_000;
    while (id === '' && Date.now() < deadline) id = (await listed())[0]?.id ?? '';
    await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit');
    expect((await runCli(['topology', 'migration', 'commit', id, '-f', w.file])).code).toBe(0);
    const done = await migrate;
    expect(done.code).toBe(0);
    expect(done.stderr).toContain(
      `awaiting commit: run \`cutover topology migration commit ${id} -f ${w.file}\``,
    );
    expect(done.stdout).toBe(`${id}: completed\n`);
  });
});
