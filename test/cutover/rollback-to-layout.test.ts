/**
 * The way back after a commit: `cutover topology rollback --to …` runs a recorded earlier layout as
 * an ordinary green-blue migration. Real app processes, the real router, real load.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import { runBinary, runCli } from '../support/cli.js';
import { loadAnswers, minSentShare, sentRate, startTestLoad } from '../support/load.js';
import {
  liveWorkspace,
  migrateDetached,
  setFileVersion,
  type Workspace,
  waitFor,
} from '../support/migrations.js';
import { Api, ServerHarness } from '../support/server.js';

type Live = Workspace & { url: string };

/**
 * The live demo (web 1.0.0 behind the router), `migrated` once or not at all; taken down when the
 * test `t` ends (the tests after the first run at once, each in a workspace of its own).
 */
async function live(t: TestContext, migrated = true): Promise<Live> {
  const w = await liveWorkspace();
  t.onTestFinished(() => w.cleanup());
  if (migrated) expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
  return w;
}

type Run = typeof runCli;

/**
 * Migrates the file from one version to another; the migration's id. In this process (`runCli`),
 * or as the real binary (`runBinary`): beside the load, so that the migration runs in a process of
 * its own, and where the engine reads CUTOVER_KEEP_LAYOUTS (from its process's environment).
 */
async function bump(w: Live, from: string, to: string, run: Run = runCli, env: NodeJS.ProcessEnv = {}) {
  setFileVersion(w, from, to);
  const result = await run(['topology', 'migrate', '-f', w.file, '--yes'], { env });
  expect(result.code, result.stderr).toBe(0);
  return /^(mig_[0-9a-z]+): completed$/m.exec(result.stdout)?.[1] as string;
}

/** `cutover topology rollback --to`, in this process unless `run` says otherwise (see `bump`). */
const rollback = (
  w: Live,
  to: string,
  extra: string[] = [],
  run: Run = runCli,
  env: NodeJS.ProcessEnv = {},
) => run(['topology', 'rollback', '--to', to, '-f', w.file, '--yes', ...extra], { env });

async function versionServed(w: Live): Promise<string> {
  return ((await (await fetch(w.url)).json()) as { version: string }).version;
}

function layout(w: Live, file = 'layout.json') {
  return JSON.parse(readFileSync(path.join(w.stateDir, 'environments', 'live-demo', file), 'utf8')) as {
    serial: number;
    migrationId?: string;
    topology: { components: { web: { version: string } } } | null;
  };
}

function kept(w: Live): number[] {
  return readdirSync(path.join(w.stateDir, 'environments', 'live-demo', 'layouts'))
    .map((f) => Number(f.replace('.json', '')))
    .sort((a, b) => a - b);
}

function logKinds(w: Live, id: string): string[] {
  const file = path.join(w.stateDir, 'environments', 'live-demo', 'migrations', id, 'log.ndjson');
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => (JSON.parse(l) as { kind: string }).kind);
}

const rate = 500;
/**
 * Answers before the change (the load flows: its process takes 0.2-0.4 s to start at load 14, where
 * the fixed 500 ms waited here before saw 40-150 answers) and after it (the test wants 100 after).
 */
const answersBefore = 50;
const answersAfter = 150;

// The load test runs alone (500 requests/s through a router on the same cores; sent from a process
// of its own, `ownProcess`); the others wait on their own processes and run at once.
describe('cutover topology rollback --to', () => {
  it('previous, under load after a commit: a green-blue migration back to 1.0.0, zero failed, a new serial', async (t) => {
    const w = await live(t);
    await bump(w, '1.0.0', '2.0.0', runBinary);
    expect(await versionServed(w)).toBe('2.0.0');
    const load = startTestLoad({ url: w.url, rate });
    await loadAnswers(load, answersBefore); // from 2.0.0, before the rollback
    const result = await rollback(w, 'previous', [], runBinary);
    const endedAt = Date.now();
    await loadAnswers(load, answersAfter, endedAt + 50);
    const run = await load.stop();
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('Rolling live-demo back from serial 2 to the layout of serial 1');
    expect(result.stderr).toMatch(/~ web.*2\.0\.0 → 1\.0\.0|version: "?2\.0\.0"? → "?1\.0\.0"?/s);
    const id = /^(mig_[0-9a-z]+): completed$/m.exec(result.stdout)?.[1] as string;
    expect(id).toBeDefined();
    expect(run.failed).toBe(0);
    // The load was really sent (the generator shares 2 cores with the run: 424-445 of 500/s seen),
    // judged on when the requests went out, not when the last answer came (test/support/load.ts).
    expect(sentRate(run)).toBeGreaterThanOrEqual(rate * minSentShare);
    const after = run.records.filter((r) => load.origin + (r.doneAt ?? 0) > endedAt + 50);
    expect(after.length).toBeGreaterThan(100);
    expect(new Set(after.map((r) => r.version))).toEqual(new Set(['1.0.0']));
    expect(run.records.some((r) => r.version === '2.0.0')).toBe(true);
    // An ordinary green-blue migration: gated, shifted, committed as serial 3; history kept.
    expect(logKinds(w, id)).toEqual(expect.arrayContaining(['gate_passed', 'committing', 'completed']));
    expect(layout(w)).toMatchObject({ serial: 3, migrationId: id });
    expect(layout(w).topology?.components.web.version).toBe('1.0.0');
    expect(kept(w)).toEqual([1, 2, 3]);
  });

  it.concurrent('<migration id> and serial:<n>: the layout that migration committed, with --json as migrate', async (t) => {
    const w = await live(t);
    const to2 = await bump(w, '1.0.0', '2.0.0');
    await bump(w, '2.0.0', '3.0.0');
    // A unique prefix: the first 10 characters of a ULID are its millisecond time, so 8 of them
    // (slice(0, 12)) are shared by migrations created within about a second of each other.
    const back = await rollback(w, to2.slice(0, 'mig_'.length + 16), ['--json']);
    expect(back.code, back.stderr).toBe(0);
    const backSummary = JSON.parse(back.stdout).summary;
    // Recorded as what it is (issue 29, item 6): the layout it went back to, in JSON, show and list.
    expect(backSummary).toMatchObject({
      lifecycle: 'completed',
      rolledBackTo: { serial: 2, migrationId: to2 },
    });
    const shown = await runCli(['topology', 'migration', 'show', backSummary.id, '--state-dir', w.stateDir]);
    expect(shown.stdout).toContain(
      `rollback:  back to serial 2 (recorded by ${to2}), made by \`cutover topology rollback --to\``,
    );
    const listed = await runCli(['topology', 'migration', 'list', '--state-dir', w.stateDir]);
    expect(listed.stdout).toMatch(
      new RegExp(`${backSummary.id} +live-demo +completed \\(rollback to serial 2\\)`),
    );
    // A forward migration has none.
    expect(listed.stdout).toMatch(new RegExp(`${to2} +live-demo +completed +\\d+/`));
    expect(await versionServed(w)).toBe('2.0.0');
    expect(layout(w).serial).toBe(4);
    const first = await rollback(w, 'serial:1');
    expect(first.code, first.stderr).toBe(0);
    expect(await versionServed(w)).toBe('1.0.0');
    expect(layout(w).serial).toBe(5);
  });

  it.concurrent('keeps the last CUTOVER_KEEP_LAYOUTS layouts; one no longer kept is named, with what to do', async (t) => {
    const w = await live(t);
    const env = { CUTOVER_KEEP_LAYOUTS: '2' };
    await bump(w, '1.0.0', '2.0.0', runBinary, env);
    await bump(w, '2.0.0', '3.0.0', runBinary, env);
    expect(kept(w)).toEqual([2, 3]);
    const gone = await rollback(w, 'serial:1');
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain(
      'live-demo: layout serial 1 is no longer kept (only the last ones are; see CUTOVER_KEEP_LAYOUTS)',
    );
    setFileVersion(w, '3.0.0', '4.0.0');
    const bad = await runBinary(['topology', 'migrate', '-f', w.file, '--yes'], {
      env: { CUTOVER_KEEP_LAYOUTS: 'all' },
    });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('CUTOVER_KEEP_LAYOUTS=all: not a whole number of at least 1');
  });

  it.concurrent('errors say what to do: nothing recorded, nothing before, the current one, an empty layout, unknown or uncommitted ids', async (t) => {
    const w = await live(t, false);
    const none = await rollback(w, 'previous');
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('environment live-demo has no recorded layout');
    expect(await rollback(w, 'serial:x').then((r) => r.stderr)).toContain(
      '--to serial:x: a serial is a whole number, e.g. --to serial:3',
    );

    expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
    const first = await rollback(w, 'previous');
    expect(first.code).toBe(1);
    expect(first.stderr).toContain('there is no layout before serial 1');
    expect((await rollback(w, 'serial:1')).stderr).toContain('serial 1 is the current layout');
    const unknown = await rollback(w, 'mig_zzzz');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('mig_zzzz');

    // A migration rolled back before its commit recorded no layout.
    setFileVersion(w, '1.0.0', '2.0.0', (y) => `${y}strategy: { commit: manual }\n`);
    const undone = await migrateDetached(w);
    await waitFor(w, undone, (s) => s.lifecycle === 'awaiting_commit');
    expect((await runCli(['topology', 'migration', 'rollback', undone, '-f', w.file])).code).toBe(0);
    const never = await rollback(w, undone);
    expect(never.code).toBe(1);
    expect(never.stderr).toContain(`${undone} never committed (it is rolled back)`);

    // After `down`, the layout before it is the way back; the empty layout itself is not one.
    expect((await runCli(['topology', 'down', '-f', w.file, '--yes'])).code).toBe(0);
    const back = await rollback(w, 'previous');
    expect(back.code, back.stderr).toBe(0);
    expect(await versionServed(w)).toBe('1.0.0');
    expect(layout(w).serial).toBe(3);
    const empty = await rollback(w, 'serial:2');
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain('layout serial 2 is the empty layout `cutover topology down` recorded');
  });

  it.concurrent('through a cutover server: POST /v1/environments/{name}/rollback plans (dryRun) and runs it; the CLI with --server', async (t) => {
    const w = await live(t);
    const servers = new ServerHarness();
    t.onTestFinished(() => servers.cleanup());
    await bump(w, '1.0.0', '2.0.0');
    const server = await servers.start({ stateDir: w.stateDir, workdir: path.dirname(w.file) });
    const api = await Api.connect(server.url);
    const dry = await api.post('/v1/environments/live-demo/rollback', { to: 'previous', dryRun: true });
    expect(dry.status).toBe(200);
    expect(dry.json).toMatchObject({ currentSerial: 2, target: { serial: 1 }, plan: { baseSerial: 2 } });
    const missing = await api.post('/v1/environments/live-demo/rollback', { to: 'serial:9' });
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({
      code: 'LAYOUT_NOT_FOUND',
      detail: 'live-demo: there is no serial 9; the current layout is serial 2',
    });
    const result = await rollback(w, 'previous', ['--server', server.url]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('Rolling live-demo back from serial 2 to the layout of serial 1');
    expect(result.stdout).toMatch(/^mig_[0-9a-z]+: completed$/m);
    expect(await versionServed(w)).toBe('1.0.0');
    expect(layout(w).serial).toBe(3);
  });
});
