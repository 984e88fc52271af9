/**
 * The engine's acceptance tests, written once and run in both modes through the real CLI: local (a
 * state directory beside the topology, detached runner processes) and Temporal (WORKFLOW_HOST: the
 * run's dev server, a worker of each scenario's own, on a task queue of its own). Every
 * scenario must behave the same in both: a completed migration, a failed gate rolled back by
 * itself, every verb allowed and refused, a conflicting second migrate, a manual commit, and a
 * rollback after commit refused with the reason, on the CLI and over HTTP (`cutover server`).
 *
 * The verb table itself (which verb each lifecycle allows, and each refusal's reason) is checked
 * against the code and docs/migrating.md by test/lifecycle-table.test.ts; here each mode shows that a
 * refusal reaches the CLI as one line and changes nothing, in every lifecycle a scenario passes
 * through, every verb refused at least once after the end and all of them after the commit.
 *
 * In Temporal mode the exec scripts of test/fixtures/gated run in the worker, so the release gate
 * and the slots live in the worker's state directory: each scenario has a worker of its own, so
 * that scenarios run beside each other without opening each other's gates; each test's environment
 * has a name of its own (one dev server serves the whole run, and workflow ids are per environment).
 */
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it, type TestContext } from 'vitest';
import { runCli } from '../support/cli.js';
import { setVersion, type Workspace, workspace } from '../support/migrations.js';
import { Api, demoApply, ServerHarness, type MigrationSummary as Summary } from '../support/server.js';
import {
  startWorker,
  type TestWorker,
  temporalAddress,
  uniqueTaskQueue,
} from '../support/temporal-worker.js';

type Mode = 'local' | 'temporal';

const idLine = /^mig_[0-9a-z]{26}$/;
const finals = ['completed', 'rolled_back', 'cancelled', 'failed'];
const isFinal = (s: Summary) => finals.includes(s.lifecycle);
const allVerbs = ['pause', 'resume', 'rollback', 'cancel', 'commit'];
let serial = 0;

// The two modes side by side, and each mode's scenarios beside each other (up to the temporal
// project's maxConcurrency): they share nothing, each in a workspace (and in Temporal mode a worker,
// task queue and driver state directory) of its own, and most of each is waits (a gate probed every
// second, a runner's or workflow's next step).
describe.concurrent.each<Mode>(['local', 'temporal'])('engine acceptance (%s mode)', (mode) => {
  describe.concurrent('through the CLI and cutover server', () => scenarios(mode));
});

function scenarios(mode: Mode): void {
  /** In Temporal mode, the worker of each workspace (its drivers' records, its task queue). */
  const workers = new Map<Workspace, TestWorker>();

  /** The mode's environment for the CLI: WORKFLOW_HOST (and the workspace's queue) or none. */
  const env = (w: Workspace): NodeJS.ProcessEnv =>
    mode === 'temporal' ? workerOf(w).env : { WORKFLOW_HOST: '' };
  const workerOf = (w: Workspace): TestWorker => {
    const worker = workers.get(w);
    if (!worker) throw new Error(`no Temporal worker for ${w.file}`);
    return worker;
  };
  /** Where the drivers keep their records: the slots and the release gate. */
  const driverStateDir = (w: Workspace) => (mode === 'temporal' ? workerOf(w).stateDir : w.stateDir);

  /**
   * A copy of the gated fixture under an environment name of its own (and in Temporal mode a worker
   * of its own), removed (and stopped) when the test ends. A held gate stays held for
   * the test's length: the fixture's 100 failures at 200 ms failed it after 20 s, and under load
   * the verbs a scenario gives at the gate took longer (pause found the migration failed); at 1 s
   * a probe it holds 100 s, and an open gate still passes at the first probe.
   */
  async function ws(
    onTestFinished: TestContext['onTestFinished'],
    edit: (yaml: string) => string = (y) => y,
  ): Promise<Workspace> {
    serial += 1;
    const name = `acc-${mode}-${serial}-${process.pid}`;
    const held = (y: string) =>
      y.replace('interval: 200ms', 'interval: 1s').replace('deadline: 60s', 'deadline: 10m');
    const w = await workspace('test/fixtures/gated', (y) =>
      held(edit(y.replace('name: gated', `name: ${name}`))),
    );
    onTestFinished(async () => {
      await workers.get(w)?.stop();
      workers.delete(w);
      await w.cleanup();
    }, 30_000);
    if (mode === 'temporal') {
      workers.set(
        w,
        await startWorker({ address: temporalAddress(), taskQueue: uniqueTaskQueue('cutover-acceptance') }),
      );
    }
    return w;
  }

  const cli = (w: Workspace, args: string[]) => runCli(args, { env: env(w) });
  const verb = (w: Workspace, v: string, id: string) =>
    cli(w, ['topology', 'migration', v, id, '-f', w.file]);

  function gate(w: Workspace, open: boolean): void {
    const file = path.join(driverStateDir(w), 'release-gate');
    if (open) {
      mkdirSync(driverStateDir(w), { recursive: true });
      writeFileSync(file, '');
    } else {
      rmSync(file, { force: true });
    }
  }

  /** The slots (exec fixture: one directory each) a migration brought up and still has. */
  function slotsOf(w: Workspace, id: string): string[] {
    const dir = path.join(driverStateDir(w), 'slots');
    return existsSync(dir) ? readdirSync(dir).filter((slot) => slot.endsWith(id)) : [];
  }

  async function migrateDetached(w: Workspace): Promise<string> {
    const result = await cli(w, ['topology', 'migrate', '-f', w.file, '--yes', '--detach']);
    expect(result.stderr).not.toMatch(/^cutover: /m);
    expect(result.code).toBe(0);
    const id = result.stdout.trim();
    expect(id).toMatch(idLine);
    return id;
  }

  async function show(w: Workspace, id: string): Promise<Summary> {
    const result = await cli(w, ['topology', 'migration', 'show', id, '-f', w.file, '--json']);
    if (result.code !== 0)
      throw new Error(`show ${id} failed (exit ${result.code}): ${result.stdout}${result.stderr}`);
    return (JSON.parse(result.stdout) as { summary: Summary }).summary;
  }

  async function waitFor(w: Workspace, id: string, predicate: (s: Summary) => boolean): Promise<Summary> {
    const deadline = Date.now() + 20_000;
    let last: Summary | undefined;
    while (Date.now() < deadline) {
      last = await show(w, id);
      if (predicate(last)) return last;
      await sleep(100);
    }
    throw new Error(`timed out waiting for ${id}; last: ${JSON.stringify(last)}`);
  }

  const atGate = (s: Summary) => s.status.includes('health_gate') && s.actionsDone >= 3;

  /** Each verb is refused with one line giving the reason, and changes nothing. */
  async function refusedIn(w: Workspace, id: string, verbs: string[], state: string): Promise<void> {
    // All at once: a refusal changes nothing, so the order does not matter.
    const results = await Promise.all(verbs.map((v) => verb(w, v, id)));
    for (const [i, result] of results.entries()) {
      const v = verbs[i];
      expect({ v, code: result.code }).toEqual({ v, code: 1 });
      expect(result.stderr).toMatch(
        new RegExp(`^cutover: cannot (pause|resume|roll back|cancel|commit) ${id}: .+\\n$`),
      );
    }
    expect((await show(w, id)).lifecycle).toBe(state);
  }

  it('completes a migration (exit 0, the stages in the log, a plan with no changes), then fails the next one whose health gate fails: rolled back by itself, blue untouched, exit 1', async ({
    expect,
    onTestFinished,
  }) => {
    // The gate is open for the first migration: failureThreshold 1 only matters for the second.
    const w = await ws(onTestFinished, (y) => y.replace('failureThreshold: 100', 'failureThreshold: 1'));
    gate(w, true);
    const result = await cli(w, ['topology', 'migrate', '-f', w.file, '--yes']);
    expect(result.stderr).toContain('Plan: 3 to add, 0 to change, 0 to remove; 5 actions.');
    expect(result.code).toBe(0);
    const id = /^(mig_[0-9a-z]{26}): completed$/m.exec(result.stdout)?.[1] as string;
    expect(id).toBeDefined();

    const logs = await cli(w, ['topology', 'migration', 'logs', id, '-f', w.file, '--json']);
    expect(logs.code).toBe(0);
    const stages = logs.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { kind: string; message: string })
      .filter((l) => ['stage_entered', 'committing', 'completed'].includes(l.kind))
      .map((l) => l.message.split(/[;:]/)[0]);
    expect(stages).toEqual([
      'stage provision_green',
      'stage health_gate',
      'stage cutover',
      'all stages passed',
      'completed',
    ]);
    const shown = await show(w, id);
    expect(shown).toMatchObject({ lifecycle: 'completed', status: 'completed', reason: null });
    expect(slotsOf(w, id)).toHaveLength(2);

    const list = JSON.parse((await cli(w, ['topology', 'migration', 'list', '-f', w.file, '--json'])).stdout);
    expect(list.items.map((m: { id: string }) => m.id)).toContain(id);
    const again = await cli(w, ['topology', 'plan', '-f', w.file, '--detailed-exitcode']);
    expect(again.stdout).toContain('No changes.');
    expect(again.code).toBe(0);

    // Its slots are blue for the next migration, which must leave them untouched.
    const blue = slotsOf(w, id);

    setVersion(w, 'db', '2');
    gate(w, false);
    const second = await cli(w, ['topology', 'migrate', '-f', w.file, '--yes']);
    expect(second.code).toBe(1);
    const failedLine =
      /^(mig_[0-9a-z]{26}): failed: health gate failed for api: command \.\/infra\/check-health → exit 1: gate held \(1 failure in a row\)$/m;
    expect(second.stdout).toMatch(failedLine);
    const failedId = failedLine.exec(second.stdout)?.[1] as string;
    expect(slotsOf(w, failedId)).toEqual([]);
    expect(slotsOf(w, id)).toEqual(blue);

    const failed = await show(w, failedId);
    expect(failed.lifecycle).toBe('failed');
    expect(failed.reason).toContain('health gate failed for api');
    await refusedIn(w, failedId, ['pause', 'rollback'], 'failed');
    // The layout is still the first migration's: the change is still to be made.
    expect((await cli(w, ['topology', 'plan', '-f', w.file, '--detailed-exitcode'])).code).toBe(2);
  }, 90_000);

  it('running ⇄ paused, a second migrate refused as a conflict, then cancel; cancelled refuses verbs', async ({
    expect,
    onTestFinished,
  }) => {
    const w = await ws(onTestFinished);
    gate(w, false);
    const id = await migrateDetached(w);
    await waitFor(w, id, atGate);

    for (const extra of [[], ['--detach']]) {
      const second = await cli(w, ['topology', 'migrate', '-f', w.file, '--yes', ...extra]);
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(
        new RegExp(
          `^cutover: environment acc-${mode}-\\d+-\\d+ already has a migration in flight: ${id} \\(running \\(health_gate\\), started \\d\\d:\\d\\d:\\d\\d\\)$`,
          'm',
        ),
      );
    }

    await refusedIn(w, id, ['resume', 'commit'], 'running');
    const pause = await verb(w, 'pause', id);
    expect(pause.code).toBe(0);
    expect(pause.stdout).toMatch(new RegExp(`^${id}: (pausing|paused)`));
    await waitFor(w, id, (s) => s.lifecycle === 'paused');
    await refusedIn(w, id, ['pause', 'commit'], 'paused');
    expect((await verb(w, 'resume', id)).code).toBe(0);
    expect((await show(w, id)).lifecycle).toBe('running');
    expect((await verb(w, 'cancel', id)).code).toBe(0);
    expect((await waitFor(w, id, isFinal)).lifecycle).toBe('cancelled');
    expect(slotsOf(w, id)).toEqual([]);
    await refusedIn(w, id, ['resume', 'cancel'], 'cancelled');
  }, 90_000);

  it('rollback from running and from paused; a rolled-back migration refuses verbs', async ({
    expect,
    onTestFinished,
  }) => {
    const w = await ws(onTestFinished);
    gate(w, false);
    const a = await migrateDetached(w);
    await waitFor(w, a, atGate);
    expect((await verb(w, 'rollback', a)).code).toBe(0);
    expect((await waitFor(w, a, isFinal)).lifecycle).toBe('rolled_back');
    expect(slotsOf(w, a)).toEqual([]);
    await refusedIn(w, a, ['commit', 'rollback'], 'rolled_back');

    const b = await migrateDetached(w);
    await waitFor(w, b, atGate);
    expect((await verb(w, 'pause', b)).code).toBe(0);
    await waitFor(w, b, (s) => s.lifecycle === 'paused');
    expect((await verb(w, 'rollback', b)).code).toBe(0);
    expect((await waitFor(w, b, isFinal)).lifecycle).toBe('rolled_back');
    expect(slotsOf(w, b)).toEqual([]);
  }, 90_000);

  it('takes an environment down: refused while a migration is in flight, then every slot and route stopped, the layout empty', async ({
    expect,
    onTestFinished,
  }) => {
    const w = await ws(onTestFinished);
    gate(w, false);
    const id = await migrateDetached(w);
    await waitFor(w, id, atGate);
    const refused = await cli(w, ['topology', 'down', '-f', w.file, '--yes']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(new RegExp(`^cutover: .*migration in flight: ${id}`, 'm'));
    expect((await show(w, id)).lifecycle).toBe('running');

    gate(w, true);
    expect((await waitFor(w, id, isFinal)).lifecycle).toBe('completed');
    expect(slotsOf(w, id)).toHaveLength(2);
    // A driver that fails: said as such, and the next down finishes the job.
    writeFileSync(path.join(driverStateDir(w), 'fail-retire'), '');
    const failed = await cli(w, ['topology', 'down', '-f', w.file, '--yes']);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(
      /^cutover: taking acc-\S+ down failed at.* retire script exited with code 3/m,
    );
    rmSync(path.join(driverStateDir(w), 'fail-retire'));
    const down = await cli(w, ['topology', 'down', '-f', w.file, '--yes']);
    expect(down.stderr).not.toMatch(/^cutover: /m);
    expect(down.code).toBe(0);
    expect(down.stdout).toMatch(/^acc-\S+: stopped 2 components and 1 route\n$/);
    expect(slotsOf(w, id)).toEqual([]);
    // The layout is empty: everything is to add again; a second down finds nothing.
    const plan = await cli(w, ['topology', 'plan', '-f', w.file]);
    expect(plan.stdout).toContain('Plan: 3 to add, 0 to change, 0 to remove');
    const again = await cli(w, ['topology', 'down', '-f', w.file, '--json', '--yes']);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ components: [], routes: [] });
    // And the environment takes a migration again.
    const next = await migrateDetached(w);
    expect((await waitFor(w, next, isFinal)).lifecycle).toBe('completed');
  }, 90_000);

  it('manual commit: awaiting_commit → commit → completed; after it every verb is refused, rollback saying why', async ({
    expect,
    onTestFinished,
  }) => {
    const w = await ws(onTestFinished, (y) => y.replace('commit: auto', 'commit: manual'));
    gate(w, true);
    // Cancelled, then rolled back, while awaiting commit: both allowed there.
    for (const [v, end] of [
      ['cancel', 'cancelled'],
      ['rollback', 'rolled_back'],
    ] as const) {
      const id = await migrateDetached(w);
      await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit');
      expect((await verb(w, v, id)).code).toBe(0);
      expect((await waitFor(w, id, isFinal)).lifecycle).toBe(end);
      expect(slotsOf(w, id)).toEqual([]);
    }

    const id = await migrateDetached(w);
    const waiting = await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit');
    expect(waiting.status).toBe('awaiting commit');
    await refusedIn(w, id, ['pause', 'resume'], 'awaiting_commit');
    const commit = await verb(w, 'commit', id);
    expect(commit.code).toBe(0);
    // The commit waits for the end: blue retired, the migration completed.
    expect(commit.stdout).toBe(`${id}: completed\n`);
    const done = await waitFor(w, id, isFinal);
    expect(done.lifecycle).toBe('completed');
    expect(slotsOf(w, id)).toHaveLength(2);
    await refusedIn(w, id, allVerbs, 'completed');

    const refused = await verb(w, 'rollback', id);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      new RegExp(
        `^cutover: cannot roll back ${id}: it is committed \\(committed at \\d\\d:\\d\\d:\\d\\d\\)\\n$`,
      ),
    );
    expect((await cli(w, ['topology', 'plan', '-f', w.file, '--detailed-exitcode'])).code).toBe(0);
  }, 90_000);

  describe('cutover server', () => {
    const servers = new ServerHarness();
    afterAll(() => servers.cleanup(), 20_000);

    it('answers a rollback after commit with 409 VERB_REFUSED and the reason', async ({ expect }) => {
      const stateDir = await servers.stateDir();
      // In Temporal mode the server runs its own worker, on a queue of its own.
      const serverEnv: Record<string, string> =
        mode === 'temporal'
          ? {
              WORKFLOW_HOST: temporalAddress(),
              TEMPORAL_TASK_QUEUE: uniqueTaskQueue('cutover-acceptance-server'),
            }
          : { WORKFLOW_HOST: '' };
      const server = await servers.start({ stateDir, env: serverEnv });
      expect(server.stderr()).toContain(
        mode === 'temporal'
          ? `migrations: Temporal at WORKFLOW_HOST=${serverEnv.WORKFLOW_HOST}, with a worker`
          : 'migrations: local',
      );
      const api = await Api.connect(server.url);
      serial += 1;
      const apply = await api.post(
        '/v1/apply',
        demoApply({ name: `acc-http-${mode}-${serial}-${process.pid}` }),
      );
      expect(apply.status).toBe(202);
      const id = apply.json.summary.id as string;
      const done = await api.waitFor(id, (s) => s.endedAt !== null);
      expect(done.lifecycle).toBe('completed');

      const refused = await api.post(`/v1/migrations/${id}/rollback`);
      expect(refused.status).toBe(409);
      expect(refused.json.code).toBe('VERB_REFUSED');
      expect(refused.json.detail).toMatch(
        new RegExp(`^cannot roll back ${id}: it is committed \\(committed at \\d\\d:\\d\\d:\\d\\d\\)$`),
      );
      expect((await api.summary(id)).lifecycle).toBe('completed');

      // Taken down over HTTP: what it stopped, then nothing the second time.
      const environment = done.environment;
      const down = await api.post(`/v1/environments/${environment}/down`);
      expect(down.status).toBe(200);
      expect(down.json.components.length).toBeGreaterThan(0);
      const again = await api.post(`/v1/environments/${environment}/down`);
      expect(again.json).toEqual({ environment, components: [], routes: [] });
    }, 90_000);
  });
}
