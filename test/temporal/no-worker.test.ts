/**
 * Temporal mode with no worker on the task queue: what needs one (reading a recorded layout, the
 * status of a running migration, a verb) says so at once, naming the queue and what to start,
 * instead of waiting out the call deadline; what does not (a first plan) works.
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { describe, it } from 'vitest';
import { emptyLayout } from '../../core/layout.js';
import { dataConverter } from '../../engine/temporal/payload-codec.js';
import { environmentWorkflowId } from '../../engine/temporal/workflow-definitions.js';
import { repoRoot, runCli, tempDir } from '../support/cli.js';
import { eventually } from '../support/wait.js';
import { sharedTemporal, temporalEnv, testScope, uniqueName } from './robustness-helpers.js';

// The cases at once, each on a task queue and environment of its own: each is mostly waits (the
// dev server's answer for a queue no live worker polls, a worker's start).
describe.concurrent('Temporal mode without a worker', () => {
  it('plans a new environment, and says at once that a recorded one needs a worker', async ({
    expect,
    onTestFinished,
  }) => {
    const { cleanups } = testScope(onTestFinished);
    const t = { address: sharedTemporal(), taskQueue: uniqueName('no-worker') };
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const environment = uniqueName('no-worker');
    const file = path.join(dir, 'topology.yaml');
    const text = readFileSync(path.join(repoRoot, 'examples', 'exec-demo', 'topology.yaml'), 'utf8');
    writeFileSync(file, text.replace('name: exec-demo', `name: ${environment}`));

    // Nothing recorded: no worker needed.
    const first = await runCli(['topology', 'plan', '-f', file], { env: temporalEnv(t) });
    expect(first.stdout).toContain('Plan: 2 to add');
    expect(first.code).toBe(0);

    // The environment's workflow exists (as after a first migration), but no worker runs it.
    const connection = await Connection.connect({ address: t.address });
    const client = new Client({ connection, dataConverter });
    const handle = await client.workflow.start('environmentWorkflow', {
      workflowId: environmentWorkflowId(environment),
      taskQueue: t.taskQueue,
      args: [{ environment, layout: emptyLayout(environment) }],
    });
    cleanups.push(async () => {
      await handle.terminate('test over').catch(() => undefined);
      await connection.close();
    });
    const started = Date.now();
    const second = await runCli(['topology', 'plan', '-f', file], { env: temporalEnv(t) });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(second.code).toBe(1);
    expect(second.stderr).toBe(
      `cutover: no cutover worker polls task queue "${t.taskQueue}" at WORKFLOW_HOST=${t.address}, and reading the current layout needs one: start one with \`cutover worker\` (or \`cutover server\` without --no-worker), with the same TEMPORAL_TASK_QUEUE\n`,
    );
  }, 60_000);

  it('after the only worker was killed (still listed as polling), plan, status and migrate say so in one line', async ({
    expect,
    onTestFinished,
  }) => {
    const { cleanups, startWorkerProcess } = testScope(onTestFinished);
    const t = { address: sharedTemporal(), taskQueue: uniqueName('dead-worker') };
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const environment = uniqueName('dead-worker');
    cpSync(path.join(repoRoot, 'examples', 'exec-demo'), dir, { recursive: true });
    const file = path.join(dir, 'topology.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace('name: exec-demo', `name: ${environment}`));
    const worker = await startWorkerProcess(t, path.join(dir, 'worker-state'));
    const migrated = await runCli(['topology', 'migrate', '--yes', '-f', file], { env: temporalEnv(t) });
    expect(migrated.code).toBe(0);

    // SIGKILL: the worker cannot say goodbye, so Temporal lists its poller for a while yet.
    await worker.kill('SIGKILL');
    writeFileSync(file, readFileSync(file, 'utf8').replace('version: "1"', 'version: "2"'));
    const results = await Promise.all(
      [
        ['topology', 'plan', '-f', file],
        ['topology', 'status', '-f', file],
        ['topology', 'migrate', '--yes', '-f', file],
      ].map((args) => runCli(args, { env: temporalEnv(t) })),
    );
    for (const result of results) {
      expect(result.stderr).toMatch(
        new RegExp(
          `^cutover: no cutover worker answered for the current layout on task queue "${t.taskQueue}" at WORKFLOW_HOST=${t.address.replaceAll('.', '\\.')} \\(one that died stays listed as polling for a minute or so\\): start one with \`cutover worker\``,
        ),
      );
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.code).toBe(1);
    }
  }, 90_000);

  it('a migration started with no worker says once that it is queued, is listed, and runs when a worker comes', async ({
    expect,
    onTestFinished,
  }) => {
    const { cleanups, startWorker } = testScope(onTestFinished);
    const t = { address: sharedTemporal(), taskQueue: uniqueName('queued') };
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const environment = uniqueName('queued');
    cpSync(path.join(repoRoot, 'examples', 'exec-demo'), dir, { recursive: true });
    const file = path.join(dir, 'topology.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace('name: exec-demo', `name: ${environment}`));

    // Before: "started on Temporal", then an error; and `migration list` exited 1.
    const migrating = runCli(['topology', 'migrate', '--yes', '-f', file], { env: temporalEnv(t) });
    let listed: { items: { id: string; status: string; environment: string }[] } = { items: [] };
    await eventually(async () => {
      const list = await runCli(['topology', 'migration', 'list', '--json'], { env: temporalEnv(t) });
      expect(list.code, list.stdout + list.stderr).toBe(0);
      listed = JSON.parse(list.stdout);
      return listed.items.some((m) => m.environment === environment);
    }, 30_000);
    const queued = listed.items.find((m) => m.environment === environment);
    expect(queued?.status).toBe(`waiting for a worker: none polls task queue "${t.taskQueue}"`);

    await startWorker(t, path.join(dir, 'worker-state'));
    const migrated = await migrating;
    expect(migrated.code, migrated.stdout + migrated.stderr).toBe(0);
    const said =
      `${migrated.stdout}${migrated.stderr}`.match(/queued: no cutover worker polls task queue/g) ?? [];
    expect(said).toHaveLength(1);
    expect(migrated.stderr).toContain(
      `queued: no cutover worker polls task queue "${t.taskQueue}" at WORKFLOW_HOST=${t.address}; the migration starts when one does`,
    );
    const after = await runCli(['topology', 'migration', 'list', '--json'], { env: temporalEnv(t) });
    const done = (JSON.parse(after.stdout) as typeof listed).items.find((m) => m.id === queued?.id);
    expect(done?.status).toBe('completed');
  }, 120_000);

  it("lists only its task queue's migrations: another queue's, with no worker to answer for it, does not fail the list", async ({
    expect,
    onTestFinished,
  }) => {
    const { cleanups, startWorker } = testScope(onTestFinished);
    const ours = { address: sharedTemporal(), taskQueue: uniqueName('ours') };
    const theirs = { address: sharedTemporal(), taskQueue: uniqueName('theirs') };
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const topology = (name: string) => {
      const at = path.join(dir, name);
      cpSync(path.join(repoRoot, 'examples', 'exec-demo'), at, { recursive: true });
      const file = path.join(at, 'topology.yaml');
      writeFileSync(file, readFileSync(file, 'utf8').replace('name: exec-demo', `name: ${uniqueName(name)}`));
      return file;
    };
    // Another deployment's migration in the same namespace, on its own queue, which no worker polls.
    const started = await runCli(['topology', 'migrate', '--yes', '--detach', '-f', topology('theirs')], {
      env: temporalEnv(theirs),
    });
    expect(started.code, started.stdout + started.stderr).toBe(0);
    const connection = await Connection.connect({ address: theirs.address });
    const client = new Client({ connection, dataConverter });
    cleanups.push(async () => {
      for await (const run of client.workflow.list({ query: `TaskQueue = '${theirs.taskQueue}'` }))
        await client.workflow
          .getHandle(run.workflowId, run.runId)
          .terminate('test over')
          .catch(() => undefined);
      await connection.close();
    });
    // Ours: a worker polls, one migration completed.
    await startWorker(ours, path.join(dir, 'worker-state'));
    const migrated = await runCli(['topology', 'migrate', '--yes', '-f', topology('ours')], {
      env: temporalEnv(ours),
    });
    expect(migrated.code, migrated.stdout + migrated.stderr).toBe(0);
    await eventually(async () => {
      for await (const _ of client.workflow.list({ query: `TaskQueue = '${theirs.taskQueue}'` })) return true;
      return false;
    }, 10_000);

    // Before: the list showed every queue's migrations and failed on theirs, whose worker is not
    // there to answer ("no cutover worker answers…"), exit 1.
    const list = await runCli(['topology', 'migration', 'list', '--json'], { env: temporalEnv(ours) });
    expect(list.code, list.stdout + list.stderr).toBe(0);
    const items = (JSON.parse(list.stdout) as { items: { id: string; status: string }[] }).items;
    expect(items.map((m) => m.status)).toEqual(['completed']);
  }, 120_000);
});
