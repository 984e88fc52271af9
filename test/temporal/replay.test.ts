/**
 * Determinism guard for the Temporal workflows: histories recorded from real runs (a completed
 * migration, an operator's rollback, a pause and resume, a failed health gate rolled back by
 * itself, a manual commit, and the environment workflow that recorded the layouts) are replayed
 * against the workflow bundle that `npm run build` makes (dist/engine/temporal/workflow-bundle.js).
 * A change to engine/temporal/workflows.ts or the step function that would make running
 * migrations take another path (a command added, removed or reordered) fails here, before it
 * breaks migrations in flight on a deployed Temporal.
 *
 * The histories are test/temporal/histories/*.json. A deliberate change of the workflow's
 * commands needs a new history set (and a plan for the runs in flight: `patched()`, or a new
 * workflow type). To re-record them, against a dev server this run starts (the global setup):
 *
 *   npm run build && RECORD_HISTORIES=1 npx vitest run test/temporal/replay.test.ts
 *
 * Recording drives the real CLI against a `cutover worker` child process, then fetches each
 * workflow's history with `client.workflow.getHandle(id, runId).fetchHistory()`.
 * RECORD_HISTORIES=parallel,parallel-rolled-back records only those (comma-separated names): a
 * history recorded by an earlier workflow is kept, to show that runs it started still replay.
 *
 * completed … environment were recorded by the workflow that ran one command at a time (before the
 * 'parallel-activities' patch); parallel and parallel-rolled-back by the one that runs every
 * command in flight at once. parallel-before-patch was recorded with the workflow from before the
 * patch built in place (engine/temporal/workflows.ts of 8981588, `npm run build`) and today's
 * client, whose spec says parallelism 10: it replays one call at a time. (Temporal's replayer
 * matches commands by type and order, not by the workflow task that issued them, so a history of
 * runCommand activities alone would replay even without the guard; the guard keeps the state the
 * workflow rebuilds the one it had.) notified was recorded with the 'notifications' patch: a
 * delivery activity per event and target beside the migration's commands, and the bounded wait
 * for them (a timer) at the end, as runs did before the 'notify-hand-off' patch (which hands what
 * is left to a child workflow instead); the histories before it have no marker and replay without them.
 * held was recorded with the 'watched-holds' patch: a hold and the bake are runCommand activities
 * that watch green's health; runs before it (no marker) wait on a durable timer and replay so.
 * placed was recorded with drivers placed on a host (issue 30): each call on `<queue>@local`.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dataConverter } from '../../engine/temporal/payload-codec.js';
import { repoRoot, runCli } from '../support/cli.js';
import { setVersion, workspace } from '../support/migrations.js';
import type { MigrationSummary as Summary } from '../support/server.js';
import { startWorker, temporalAddress, uniqueTaskQueue } from '../support/temporal-worker.js';

const historiesDir = path.join(repoRoot, 'test', 'temporal', 'histories');
/** The build's bundle; REPLAY_BUNDLE replays against another one (a candidate change, bundled aside). */
const bundle =
  process.env.REPLAY_BUNDLE ?? path.join(repoRoot, 'dist', 'engine', 'temporal', 'workflow-bundle.js');

/** Each recorded history: what it shows, and the workflow it comes from. */
const histories = {
  completed: 'a migration that completed on its own (commit: auto)',
  'rolled-back': 'an operator rollback while the health gate was held',
  'paused-resumed': 'a pause during the health gate, a resume, then completion',
  failed: 'a failed health gate, rolled back by itself',
  'manual-commit': 'commit: manual, awaiting commit, then the commit verb',
  environment: "the environment workflow, after two migrations' commits recorded their layouts",
  parallel: 'four independent components provisioned at once (parallelism 10), completed',
  'parallel-rolled-back':
    'four independent components provisioned at once, an operator rollback at the held gate',
  'parallel-before-patch':
    'the workflow from before the patch, started by a client that sets parallelism 10 (an old worker, a new client): one call at a time',
  notified:
    "a migration with a notify target (the 'notifications' patch): a delivery activity per event beside the migration, awaited at the end",
  held: "a timed hold and a bake, each an activity watching green's health (the 'watched-holds' patch), completed",
  placed:
    "drivers placed on a host (runsOn: local): every driver call on the host's queue with a schedule-to-start bound, completed",
} as const;
type Name = keyof typeof histories;

interface Recorded {
  workflowId: string;
  /** What happened, one event type per event, for a reader of the diff. */
  eventTypes: string[];
  /**
   * The History message as protobufjs' `toObject` writes it (enums and 64-bit numbers as strings,
   * bytes in base64), read back with `fromObject`. Not the SDK's historyToJSON: with this
   * install's two copies of protobufjs 8 (@temporalio/common's and @temporalio/proto's), it throws
   * "type must be a Type".
   */
  history: { events: unknown[] };
}

const { History } = proto.temporal.api.history.v1;
const objectOptions = { longs: String, enums: String, bytes: String } as const;

const file = (name: Name) => path.join(historiesDir, `${name}.json`);

describe('Temporal workflow replay (determinism)', () => {
  // The SDK sets a process-wide 'unhandledRejection' listener the first time it runs workflows in
  // a process (here, the replays) and never removes it; this file's process runs other files after
  // it (test/support/process-state-setup.ts), so it goes at the file's end. Only this file runs
  // workflows in the test process.
  let rejectionListeners: NodeJS.UnhandledRejectionListener[] = [];
  afterAll(() => {
    for (const listener of process.listeners('unhandledRejection'))
      if (!rejectionListeners.includes(listener)) process.off('unhandledRejection', listener);
  });

  beforeAll(async () => {
    rejectionListeners = process.listeners('unhandledRejection');
    try {
      // The replay workers' state changes are INFO lines; a broken replay is an error anyway.
      Runtime.install({ logger: new DefaultLogger('WARN') });
    } catch {
      // installed already
    }
    const record = process.env.RECORD_HISTORIES;
    if (record === '1') await recordAll(null);
    else if (record) await recordAll(new Set(record.split(',') as Name[]));
  }, 180_000);

  for (const [name, what] of Object.entries(histories) as [Name, string][]) {
    it(`replays ${name}: ${what}`, async () => {
      if (!existsSync(bundle)) throw new Error('dist/ is missing: run `npm run build` before this test');
      const recorded = JSON.parse(readFileSync(file(name), 'utf8')) as Recorded;
      expect(recorded.history.events.length).toBeGreaterThan(10);
      await Worker.runReplayHistory(
        { workflowBundle: { codePath: bundle }, replayName: `replay-${name}`, dataConverter },
        History.fromObject(recorded.history),
        recorded.workflowId,
      );
    });
  }
});

/** Runs each scenario (those of `only`; null: all) through the CLI against a worker, and saves the histories. */
async function recordAll(only: Set<Name> | null): Promise<void> {
  const want = (name: Name) => only === null || only.has(name);
  const address = temporalAddress();
  const worker = await startWorker({ address, taskQueue: uniqueTaskQueue('cutover-record') });
  const connection = await Connection.connect({ address });
  const client = new Client({ connection, dataConverter });
  const tag = `${Date.now().toString(36)}`;
  const spaces: { cleanup(): Promise<void> }[] = [];
  const env = worker.env;
  try {
    const gate = (open: boolean) => {
      const gateFile = path.join(worker.stateDir, 'release-gate');
      mkdirSync(worker.stateDir, { recursive: true });
      if (open) writeFileSync(gateFile, '');
      else rmSync(gateFile, { force: true });
    };
    const scenario = async (name: Name, edit: (yaml: string) => string = (y) => y) => {
      const environment = `replay-${name}-${tag}`;
      const w = await workspace('test/fixtures/gated', (y) =>
        edit(y.replace('name: gated', `name: ${environment}`)),
      );
      spaces.push(w);
      const cli = (...args: string[]) => runCli([...args, '-f', w.file], { env });
      const detach = async () => {
        const r = await cli('topology', 'migrate', '--yes', '--detach');
        if (r.code !== 0) throw new Error(`migrate failed: ${r.stderr}`);
        return r.stdout.trim();
      };
      const waitFor = async (id: string, predicate: (s: Summary) => boolean) => {
        const deadline = Date.now() + 30_000;
        while (Date.now() < deadline) {
          const r = await cli('topology', 'migration', 'show', id, '--json');
          const summary = (JSON.parse(r.stdout) as { summary: Summary }).summary;
          if (predicate(summary)) return summary;
          await sleep(200);
        }
        throw new Error(`${name}: ${id} did not get there`);
      };
      const verb = async (v: string, id: string) => {
        const r = await cli('topology', 'migration', v, id);
        if (r.code !== 0) throw new Error(`${v} failed: ${r.stderr}`);
      };
      const atGate = (s: Summary) => s.status.includes('health_gate') && s.actionsDone >= 3;
      const ended = (s: Summary) => s.endedAt !== null;
      return { environment, w, cli, detach, waitFor, verb, atGate, ended };
    };
    const save = async (name: Name, workflowId: string) => {
      const handle = client.workflow.getHandle(workflowId);
      const { runId } = await handle.describe();
      const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
      const object = History.toObject(History.fromObject(history), objectOptions) as Recorded['history'];
      const recorded: Recorded = {
        workflowId,
        eventTypes: (object.events as { eventType: string }[]).map((e) =>
          e.eventType.replace(/^EVENT_TYPE_/, ''),
        ),
        history: object,
      };
      mkdirSync(historiesDir, { recursive: true });
      writeFileSync(file(name), `${JSON.stringify(recorded)}\n`);
    };

    if (want('completed')) {
      const s = await scenario('completed');
      gate(true);
      const r = await s.cli('topology', 'migrate', '--yes');
      if (r.code !== 0) throw new Error(`completed: ${r.stderr}`);
      await save('completed', `cutover-migration-${s.environment}`);
      // A second migration of the same environment: its commit is the environment's second layout.
      setVersion(s.w, 'api', '2');
      const again = await s.cli('topology', 'migrate', '--yes');
      if (again.code !== 0) throw new Error(`completed (again): ${again.stderr}`);
      await save('environment', `cutover-environment-${s.environment}`);
    }
    if (want('rolled-back')) {
      const s = await scenario('rolled-back');
      gate(false);
      const id = await s.detach();
      await s.waitFor(id, s.atGate);
      await s.verb('rollback', id);
      expect((await s.waitFor(id, s.ended)).lifecycle).toBe('rolled_back');
      await save('rolled-back', `cutover-migration-${s.environment}`);
    }
    if (want('paused-resumed')) {
      const s = await scenario('paused-resumed');
      gate(false);
      const id = await s.detach();
      await s.waitFor(id, s.atGate);
      await s.verb('pause', id);
      await s.waitFor(id, (x) => x.lifecycle === 'paused');
      await s.verb('resume', id);
      gate(true);
      expect((await s.waitFor(id, s.ended)).lifecycle).toBe('completed');
      await save('paused-resumed', `cutover-migration-${s.environment}`);
    }
    if (want('failed')) {
      const s = await scenario('failed', (y) => y.replace('failureThreshold: 100', 'failureThreshold: 1'));
      gate(false);
      const id = await s.detach();
      expect((await s.waitFor(id, s.ended)).lifecycle).toBe('failed');
      await save('failed', `cutover-migration-${s.environment}`);
    }
    if (want('manual-commit')) {
      const s = await scenario('manual-commit', (y) => y.replace('commit: auto', 'commit: manual'));
      gate(true);
      const id = await s.detach();
      await s.waitFor(id, (x) => x.lifecycle === 'awaiting_commit');
      await s.verb('commit', id);
      expect((await s.waitFor(id, s.ended)).lifecycle).toBe('completed');
      await save('manual-commit', `cutover-migration-${s.environment}`);
    }
    // The gated layout with api independent of db, and two more components: four provisions at once.
    const independent = (y: string) =>
      y
        .replace(/^\s*dependsOn: \[db\]\n/m, '')
        .replace(
          /^routes:/m,
          '  cache: { driver: infra, version: "1" }\n  queue: { driver: infra, version: "1" }\nroutes:',
        );
    if (want('parallel')) {
      const s = await scenario('parallel', independent);
      gate(true);
      const id = await s.detach();
      expect((await s.waitFor(id, s.ended)).lifecycle).toBe('completed');
      await save('parallel', `cutover-migration-${s.environment}`);
    }
    if (want('parallel-before-patch')) {
      const s = await scenario('parallel-before-patch', independent);
      gate(true);
      const id = await s.detach();
      expect((await s.waitFor(id, s.ended)).lifecycle).toBe('completed');
      await save('parallel-before-patch', `cutover-migration-${s.environment}`);
    }
    if (want('parallel-rolled-back')) {
      const s = await scenario('parallel-rolled-back', independent);
      gate(false);
      const id = await s.detach();
      await s.waitFor(id, s.atGate);
      await s.verb('rollback', id);
      expect((await s.waitFor(id, s.ended)).lifecycle).toBe('rolled_back');
      await save('parallel-rolled-back', `cutover-migration-${s.environment}`);
    }
    if (want('notified')) {
      const s = await scenario(
        'notified',
        (y) => `${y}\nnotify:\n  ops:\n    type: command\n    command: ["true"]\n`,
      );
      gate(true);
      const id = await s.detach();
      expect((await s.waitFor(id, s.ended)).lifecycle).toBe('completed');
      // The run ends once the deliveries are done (or at the bound), a moment after the migration.
      const workflowId = `cutover-migration-${s.environment}`;
      await client.workflow.getHandle(workflowId).result();
      await save('notified', workflowId);
    }
    if (want('held')) {
      const s = await scenario('held', (y) =>
        y
          .replace('to: api }', 'to: api, shift: [{ weight: 50, hold: 1s }, 100] }')
          .replace('commit: auto', 'commit: auto\n  bake: 1s'),
      );
      gate(true);
      // The first deployment creates the route at 100 %; the second shifts it, and holds.
      const first = await s.cli('topology', 'migrate', '--yes');
      if (first.code !== 0) throw new Error(`held (first): ${first.stderr}`);
      setVersion(s.w, 'api', '2');
      const id = await s.detach();
      expect((await s.waitFor(id, s.ended)).lifecycle).toBe('completed');
      const workflowId = `cutover-migration-${s.environment}`;
      await client.workflow.getHandle(workflowId).result();
      await save('held', workflowId);
    }
    if (want('placed')) {
      // A worker without --host is the host `local`: it polls `<queue>@local` beside the shared queue.
      const s = await scenario('placed', (y) =>
        y
          .replace(
            'infra: { type: exec, dir: ./infra, timeout: 30s }',
            'infra: { type: exec, dir: ./infra, timeout: 30s, runsOn: local }\n  edge: { type: router, runsOn: local }',
          )
          .replace('to: api }', 'to: api, driver: edge }'),
      );
      gate(true);
      const id = await s.detach();
      expect((await s.waitFor(id, s.ended)).lifecycle).toBe('completed');
      await save('placed', `cutover-migration-${s.environment}`);
    }
  } finally {
    await connection.close();
    await worker.stop();
    for (const w of spaces) await w.cleanup();
  }
}
