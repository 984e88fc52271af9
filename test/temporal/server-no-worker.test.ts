/**
 * `cutover server --no-worker` in Temporal mode: the server takes requests and starts workflows but
 * runs no driver call itself; a separate `cutover worker` on the same task queue carries the
 * migration out, in its own state directory.
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { afterAll, describe, expect, it } from 'vitest';
import { migrationWorkflowId } from '../../engine/temporal/workflow-definitions.js';
import { Api, demoApply, demoTopology, ServerHarness } from '../support/server.js';
import {
  startWorker,
  startWorkerProcess,
  type TestWorker,
  temporalAddress,
  uniqueTaskQueue,
} from '../support/temporal-worker.js';

const servers = new ServerHarness();
let worker: TestWorker | null = null;
afterAll(async () => {
  await worker?.stop();
  await servers.cleanup();
}, 30_000);

describe('cutover server --no-worker (Temporal mode)', () => {
  it('starts migrations that only a separate worker carries out', async () => {
    const address = temporalAddress();
    const taskQueue = uniqueTaskQueue('cutover-no-worker');
    const stateDir = await servers.stateDir();
    const server = await servers.start({
      stateDir,
      args: ['--no-worker'],
      env: { WORKFLOW_HOST: address, TEMPORAL_TASK_QUEUE: taskQueue, TEMPORAL_NAMESPACE: 'default' },
    });
    expect(server.stderr()).toContain(`migrations: Temporal at WORKFLOW_HOST=${address}, no worker`);
    const api = await Api.connect(server.url);
    const name = `no-worker-${process.pid}-${Date.now().toString(36)}`;
    const apply = await api.post('/v1/apply', demoApply({ name }));
    expect(apply.status).toBe(202);
    const id = apply.json.summary.id as string;

    // Nobody runs it yet: its workflow was started, no worker polls the queue, and no workflow
    // task of it was ever picked up (its history says so), so no slot of it exists anywhere.
    const connection = await Connection.connect({ address });
    try {
      const client = new Client({ connection, namespace: 'default' });
      const history = await client.workflow.getHandle(migrationWorkflowId(name)).fetchHistory();
      const events = history.events ?? [];
      expect(events[0]?.workflowExecutionStartedEventAttributes).toBeTruthy();
      expect(events.some((e) => e.workflowTaskStartedEventAttributes)).toBe(false);
      const queue = await connection.workflowService.describeTaskQueue({
        namespace: 'default',
        taskQueue: { name: taskQueue },
        taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
      });
      expect(queue.pollers ?? []).toEqual([]);
    } finally {
      await connection.close();
    }
    expect(existsSync(path.join(stateDir, 'exec-demo'))).toBe(false);

    worker = await startWorker({ address, taskQueue });
    const done = await api.waitFor(id, (s) => s.endedAt !== null, 60_000);
    expect(done.lifecycle).toBe('completed');
    // The driver calls ran in the worker (the exec scripts write slots under its state directory).
    expect(readdirSync(path.join(worker.stateDir, 'exec-demo')).sort()).toEqual([`api-${id}`, `db-${id}`]);
    expect(existsSync(path.join(stateDir, 'exec-demo'))).toBe(false);
  }, 90_000);

  it('refuses an apply naming a host no worker polls, unless allowAbsentHosts; then its calls there wait at most strategy.hostWait', async () => {
    const address = temporalAddress();
    const taskQueue = uniqueTaskQueue('cutover-absent');
    const server = await servers.start({
      stateDir: await servers.stateDir(),
      env: { WORKFLOW_HOST: address, TEMPORAL_TASK_QUEUE: taskQueue, TEMPORAL_NAMESPACE: 'default' },
    });
    const api = await Api.connect(server.url);
    const name = `absent-${process.pid}-${Date.now().toString(36)}`;
    const placed = `${demoTopology({ name }).replace('    dir: ./infra', '    dir: ./infra\n    runsOn: nowhere')}\nstrategy:\n  hostWait: 2s\n`;
    const body = { topology: placed, path: 'examples/exec-demo/topology.yaml' };
    const refused = await api.post('/v1/apply', body);
    expect(refused.status).toBe(503);
    const detail = String((refused.json as { detail?: unknown }).detail);
    expect(detail).toContain(`no cutover worker polls host nowhere (task queue "${taskQueue}@nowhere"`);
    expect(detail).toContain('allowAbsentHosts: true');
    const started = await api.post('/v1/apply', { ...body, allowAbsentHosts: true });
    expect(started.status, JSON.stringify(started.json)).toBe(202);
    const id = started.json.summary.id as string;
    // Its first call there is not taken within hostWait: it fails, naming the host, and the
    // migration is undone; the undo there waits for a worker of that host, and says so.
    const undoing = await api.waitFor(
      id,
      (s) => s.lifecycle === 'rolling_back' && s.status.includes('waiting for a worker on host nowhere'),
      60_000,
    );
    expect(undoing.reason).toContain('no worker on host nowhere took provision within 2s');
    const nowhere = await startWorkerProcess({ address, taskQueue, host: 'nowhere' });
    try {
      const ended = await api.waitFor(id, (s) => s.endedAt !== null, 60_000);
      expect(ended.lifecycle).toBe('failed');
    } finally {
      await nowhere.stop();
    }
  }, 150_000);
});
