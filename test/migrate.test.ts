import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import { readCurrentLayout } from '../engine/store/layout-store.js';
import { StateDir } from '../engine/store/state-dir.js';
import { readRoutingTable } from '../router/route-table.js';
import { repoRoot, runCli, startCli } from './support/cli.js';
import {
  isFinal,
  liveWorkspace,
  migrateDetached,
  releaseGate,
  setVersion,
  show,
  slotDirs,
  type Workspace,
  waitFor,
  workspace,
} from './support/migrations.js';
import { eventually } from './support/wait.js';

/** A workspace of the fixture, taken down when the test `t` ends (the tests run at once). */
async function ws(t: TestContext, fixture?: string, edit?: (yaml: string) => string): Promise<Workspace> {
  const w = await workspace(fixture, edit);
  t.onTestFinished(() => w.cleanup());
  return w;
}

const verb = (w: Workspace, v: string, id: string) => runCli(['topology', 'migration', v, id, '-f', w.file]);

// Every test has workspaces of its own and waits on its own processes: they run at once.
describe.concurrent('cutover topology migrate (local mode)', () => {
  it('migrates the exec example to completion; a plan after it has no actions', async (t) => {
    const w = await ws(t, 'examples/exec-demo');
    const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(result.stderr).toContain('Plan: 2 to add, 0 to change, 0 to remove; 4 actions.');
    expect(result.code).toBe(0);
    const id = /^(mig_[0-9a-z]+): completed$/m.exec(result.stdout)?.[1] as string;
    expect(id).toBeDefined();

    const logs = await runCli(['topology', 'migration', 'logs', id, '-f', w.file, '--json']);
    const stages = logs.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { kind: string; message: string })
      .filter((l) => l.kind === 'stage_entered' || l.kind === 'committing' || l.kind === 'completed')
      .map((l) => l.message.split(/[;:]/)[0]);
    expect(stages).toEqual(['stage provision_green', 'stage health_gate', 'all stages passed', 'completed']);

    expect((await show(w, id)).lifecycle).toBe('completed');
    const layout = await readCurrentLayout(StateDir.at(w.stateDir), 'exec-demo');
    expect(layout.serial).toBe(1);
    expect(layout.migrationId).toBe(id);
    const again = await runCli(['topology', 'plan', '-f', w.file, '--detailed-exitcode']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('No changes.');
  });

  it('fails a migration whose health gate fails: green retired, blue untouched, exit 1', async (t) => {
    const w = await ws(t, undefined, (y) => y.replace('failureThreshold: 100', 'failureThreshold: 1'));
    releaseGate(w);
    expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
    const blue = slotDirs(w);
    expect(blue).toHaveLength(2);
    const routesBefore = await readRoutingTable(w.stateDir);

    setVersion(w, 'db', '2');
    const { rm } = await import('node:fs/promises');
    await rm(path.join(w.stateDir, 'release-gate'));
    const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(
      /^mig_[0-9a-z]+: failed: health gate failed for api: command \.\/infra\/check-health → exit 1: gate held \(1 failure in a row\)$/m,
    );
    expect(slotDirs(w)).toEqual(blue);
    expect((await readCurrentLayout(StateDir.at(w.stateDir), 'gated')).serial).toBe(1);
    const routesAfter = await readRoutingTable(w.stateDir);
    // After the first commit, the route's live (blue) slot is the one that migration brought up.
    expect(routesBefore.routes['gated/web']).toMatchObject({
      greenPercent: 0,
      green: [],
      blue: ['127.0.0.1:9'],
    });
    expect(routesAfter.routes['gated/web']).toEqual(routesBefore.routes['gated/web']);
  });

  it('waits in awaiting_commit with the manual strategy; rollback after drain restores blue', async (t) => {
    const w = await ws(t, undefined, (y) => y.replace('commit: auto', 'commit: manual'));
    releaseGate(w);
    const first = await migrateDetached(w);
    await waitFor(w, first, (s) => s.lifecycle === 'awaiting_commit');
    expect((await verb(w, 'commit', first)).code).toBe(0);
    await waitFor(w, first, isFinal);
    const blue = slotDirs(w);

    setVersion(w, 'api', '2');
    const id = await migrateDetached(w);
    const waiting = await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit');
    expect(waiting.status).toBe('awaiting commit');
    const table = await readRoutingTable(w.stateDir);
    expect(table.routes['gated/web']?.greenPercent).toBe(100);

    // The rollback waits for the end: the undo steps on stderr, the end on stdout, nothing left to wait for.
    const rollback = await runCli(['topology', 'migration', 'rollback', id, '-f', w.file], {
      env: { NODE_OPTIONS: `--import=${path.join(repoRoot, 'test/fixtures/preload/report-fetch.mjs')}` },
    });
    expect(rollback.code).toBe(0);
    // Not fetch: its parser's WebAssembly compile would cost ~30 ms of CPU beside the traffic.
    expect(rollback.stderr).not.toContain('[fetch loaded]');
    expect(rollback.stderr).toMatch(/^mig_\w+: rolling back \(rollback requested\)\n/);
    expect(rollback.stderr).toMatch(
      / {2}undo: route web back to blue done\n.* {2}undo: retire green api done\n/s,
    );
    expect(rollback.stdout).toMatch(new RegExp(`^${id}: rolled back: rollback requested.*\n$`));
    expect((await show(w, id)).lifecycle).toBe('rolled_back');
    expect(slotDirs(w)).toEqual(blue);
    expect((await readRoutingTable(w.stateDir)).routes['gated/web']?.greenPercent).toBe(0);
    expect((await readCurrentLayout(StateDir.at(w.stateDir), 'gated')).serial).toBe(1);

    const refused = await verb(w, 'rollback', first);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^cutover: cannot roll back mig_[0-9a-z]+: it is committed \(committed at \d\d:\d\d:\d\d\)\n$/,
    );
  });

  it('respects the bake time before an automatic commit', async (t) => {
    const w = await ws(t, undefined, (y) => y.replace('commit: auto', 'commit: auto\n  bake: 1500ms'));
    releaseGate(w);
    const id = await migrateDetached(w);
    const baking = await waitFor(w, id, (s) => s.status.includes('bake') || isFinal(s));
    expect(baking.lifecycle).toBe('running');
    const started = Date.now();
    const done = await waitFor(w, id, isFinal);
    expect(done.lifecycle).toBe('completed');
    expect(Date.now() - started).toBeGreaterThan(900);
  });
});

/** Every verb in every state an operator can find a migration in, from another process. */
describe.concurrent('operator verbs against a detached migration', () => {
  const refusedIn = async (w: Workspace, id: string, verbs: string[], state: string) => {
    for (const v of verbs) {
      const result = await verb(w, v, id);
      expect({ v, code: result.code }).toEqual({ v, code: 1 });
      expect(result.stderr).toMatch(
        /^cutover: cannot (pause|resume|roll back|cancel|commit) mig_[0-9a-z]+: .+\n$/,
      );
      expect((await show(w, id)).lifecycle).toBe(state);
    }
  };

  it('running ⇄ paused, then cancel; a cancelled migration refuses everything', async (t) => {
    const w = await ws(t);
    const id = await migrateDetached(w);
    await waitFor(w, id, (s) => s.status.includes('health_gate'));
    await refusedIn(w, id, ['resume', 'commit'], 'running');
    expect((await verb(w, 'pause', id)).code).toBe(0);
    await waitFor(w, id, (s) => s.lifecycle === 'paused');
    await refusedIn(w, id, ['pause', 'commit'], 'paused');
    expect((await verb(w, 'resume', id)).code).toBe(0);
    expect((await show(w, id)).lifecycle).toBe('running');
    // --no-wait: back as soon as the migration took it, while it still winds down.
    const cancel = await runCli(['topology', 'migration', 'cancel', id, '-f', w.file, '--no-wait']);
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toBe(`${id}: rolling back (cancel requested)\n`);
    expect((await waitFor(w, id, isFinal)).lifecycle).toBe('cancelled');
    expect(slotDirs(w)).toEqual([]);
    await refusedIn(w, id, ['pause', 'resume', 'rollback', 'cancel', 'commit'], 'cancelled');
  });

  it('rollback from running and from paused; a rolled-back migration refuses everything', async (t) => {
    const w = await ws(t);
    const a = await migrateDetached(w);
    await waitFor(w, a, (s) => s.status.includes('health_gate'));
    expect((await verb(w, 'rollback', a)).code).toBe(0);
    expect((await waitFor(w, a, isFinal)).lifecycle).toBe('rolled_back');
    await refusedIn(w, a, ['pause', 'resume', 'rollback', 'cancel', 'commit'], 'rolled_back');

    const b = await migrateDetached(w);
    await waitFor(w, b, (s) => s.status.includes('health_gate'));
    await verb(w, 'pause', b);
    await waitFor(w, b, (s) => s.lifecycle === 'paused');
    expect((await verb(w, 'rollback', b)).code).toBe(0);
    expect((await waitFor(w, b, isFinal)).lifecycle).toBe('rolled_back');

    const c = await migrateDetached(w);
    await waitFor(w, c, (s) => s.status.includes('health_gate'));
    await verb(w, 'pause', c);
    await waitFor(w, c, (s) => s.lifecycle === 'paused');
    expect((await verb(w, 'cancel', c)).code).toBe(0);
    expect((await waitFor(w, c, isFinal)).lifecycle).toBe('cancelled');
  });

  it('awaiting commit: pause and resume refused, cancel and commit allowed; completed refuses everything', async (t) => {
    const w = await ws(t, undefined, (y) => y.replace('commit: auto', 'commit: manual'));
    releaseGate(w);
    const a = await migrateDetached(w);
    await waitFor(w, a, (s) => s.lifecycle === 'awaiting_commit');
    await refusedIn(w, a, ['pause', 'resume'], 'awaiting_commit');
    expect((await verb(w, 'cancel', a)).code).toBe(0);
    expect((await waitFor(w, a, isFinal)).lifecycle).toBe('cancelled');

    const b = await migrateDetached(w);
    await waitFor(w, b, (s) => s.lifecycle === 'awaiting_commit');
    expect((await verb(w, 'commit', b)).code).toBe(0);
    expect((await waitFor(w, b, isFinal)).lifecycle).toBe('completed');
    await refusedIn(w, b, ['pause', 'resume', 'rollback', 'cancel', 'commit'], 'completed');
  });

  it('a failed migration refuses everything and keeps its reason', async (t) => {
    const w = await ws(t, undefined, (y) => y.replace('failureThreshold: 100', 'failureThreshold: 1'));
    const id = await migrateDetached(w);
    const failed = await waitFor(w, id, isFinal);
    expect(failed.lifecycle).toBe('failed');
    expect(failed.reason).toContain('health gate failed for api');
    await refusedIn(w, id, ['pause', 'resume', 'rollback', 'cancel', 'commit'], 'failed');
  });

  it('finds a migration by a unique prefix and says when there is none', async (t) => {
    const w = await ws(t);
    releaseGate(w);
    const id = await migrateDetached(w);
    await waitFor(w, id.slice(0, 12), isFinal);
    const missing = await runCli(['topology', 'migration', 'show', 'mig_zzzz', '-f', w.file]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no migration mig_zzzz in');
    const list = JSON.parse((await runCli(['topology', 'migration', 'list', '-f', w.file, '--json'])).stdout);
    expect(list).toMatchObject({ nextCursor: null });
    expect(list.items.map((m: { id: string }) => m.id)).toEqual([id]);
  });

  it('follows the log of a running migration until it ends', async (t) => {
    const w = await ws(t);
    const id = await migrateDetached(w);
    await waitFor(w, id, (s) => s.status.includes('health_gate'));
    const follow = startCli(['topology', 'migration', 'logs', id, '-f', w.file, '--follow']);
    // Following once it printed the log so far; the migration's end is yet to come.
    await eventually(() => follow.stdout().includes(' started: 5 actions\n'), 15_000, follow.stderr);
    expect(follow.stdout()).not.toContain('environment gated is at the new layout');
    releaseGate(w);
    const result = await follow.done;
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} {2}migration mig_[0-9a-z]+ started: 5 actions$/);
    expect(lines.at(-1)).toMatch(/completed: environment gated is at the new layout$/);
  });

  it('refuses to migrate off a terminal without --yes', async (t) => {
    const w = await ws(t);
    const result = await runCli(['topology', 'migrate', '-f', w.file]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'refusing to migrate without confirmation: standard input is not a terminal; pass --yes',
    );
    expect(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')).toContain('"cutover"');
  });
  it('migrates examples/web-app (API processes behind the router, a database by scripts), then takes it down', async (t) => {
    const w = await liveWorkspace((y) => y.replace('bake: 1m', 'bake: 0s'), {
      name: 'web-app',
      listen: '127.0.0.1:18080',
    });
    t.onTestFinished(() => w.cleanup());
    const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(first.stderr + first.stdout).toMatch(/: completed$/m);
    expect(first.code).toBe(0);
    expect(((await (await fetch(w.url)).json()) as { version: string }).version).toBe('1.4.0');

    writeFileSync(
      w.file,
      readFileSync(w.file, 'utf8').replace('"1.4.0"', '"1.5.0"').replace('"16.4"', '"16.5"'),
    );
    const second = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout + second.stderr).toContain('[replicate db] copying db data from');
    expect(((await (await fetch(w.url)).json()) as { version: string }).version).toBe('1.5.0');

    const down = await runCli(['topology', 'down', '-f', w.file, '--yes']);
    expect(down.stdout).toBe('web-app: stopped 2 components and 1 route\n');
  });
});
