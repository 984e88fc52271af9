/**
 * The CLI's JSON contract (docs/json.md): one summary object under `summary`, lists as
 * `{items, nextCursor}`, ISO 8601 times, and errors as `{"error": {"code", "message"}}` on stdout
 * with the usual exit code. The CLI runs as a real process on a real state directory.
 */
import { writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from './support/cli.js';
import { releaseGate, type Workspace, workspace } from './support/migrations.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const w of spaces.splice(0)) await w.cleanup();
});

const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const json = async (args: string[]) => {
  const r = await runCli(args);
  return { ...r, body: JSON.parse(r.stdout) };
};

describe('the JSON contract of the CLI', () => {
  it('migrate, show, list and logs print the same summary, with ISO 8601 times', async () => {
    const w = await workspace();
    spaces.push(w);
    releaseGate(w);
    const migrate = await json(['topology', 'migrate', '-f', w.file, '--yes', '--json']);
    expect(migrate.code).toBe(0);
    const { summary } = migrate.body;
    expect(Object.keys(migrate.body).sort()).toEqual(['planId', 'summary']);
    expect(summary).toMatchObject({ lifecycle: 'completed' });
    for (const key of ['startedAt', 'updatedAt', 'committedAt', 'endedAt']) expect(summary[key]).toMatch(iso);

    const show = await json(['topology', 'migration', 'show', summary.id, '-f', w.file, '--json']);
    expect(show.body.summary).toEqual(summary);
    expect(show.body.state.startedAt).toMatch(iso);
    expect(show.body.state.spec.createdAt).toMatch(iso);

    const list = await json(['topology', 'migration', 'list', '-f', w.file, '--json']);
    expect(list.body).toEqual({ items: [summary], nextCursor: null });

    const logs = await runCli(['topology', 'migration', 'logs', summary.id, '-f', w.file, '--json']);
    const lines = logs.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { at: string });
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(line.at).toMatch(iso);

    // Nothing to do: the same envelope, with no summary.
    const again = await json(['topology', 'migrate', '-f', w.file, '--yes', '--json']);
    expect(again.body).toEqual({ summary: null, planId: expect.stringMatching(/^sha256:/) });
  });

  it('with --json, an error is {"error": {code, message}} on stdout, with the same exit code', async () => {
    const w = await workspace();
    spaces.push(w);
    const missing = await json(['topology', 'migration', 'show', 'mig_zzzz', '-f', w.file, '--json']);
    expect(missing.code).toBe(1);
    expect(missing.body).toEqual({
      error: { code: 'MIGRATION_NOT_FOUND', message: expect.stringContaining('no migration mig_zzzz in') },
    });
    expect(missing.stderr).toBe('');

    writeFileSync(
      w.file,
      'apiVersion: cutover/v1\nkind: Topology\nmetadata: { name: x }\ncomponents: { a: 1 }\n',
    );
    const invalid = await json(['topology', 'plan', '-f', w.file, '--format', 'json']);
    expect(invalid.code).toBe(1);
    expect(invalid.body.error.code).toBe('TOPOLOGY_INVALID');
    expect(invalid.body.error.diagnostics[0]).toMatchObject({ file: w.file, path: expect.any(String) });

    const usage = await json(['topology', 'migration', 'show', '--json']);
    expect(usage.code).toBe(1);
    expect(usage.body.error).toEqual({
      code: 'USAGE',
      message: expect.stringContaining("missing required argument 'id'"),
    });

    // Without --json: one line on stderr, as before.
    const text = await runCli(['topology', 'migration', 'show', 'mig_zzzz', '-f', w.file]);
    expect(text.stdout).toBe('');
    expect(text.stderr).toMatch(/^cutover: no migration mig_zzzz in .*\n$/);
  });
});
