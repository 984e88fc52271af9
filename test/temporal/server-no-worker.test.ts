/**
 * `cutover server --no-worker` in Temporal mode: the server takes requests and starts workflows but
 * runs no driver call itself; a separate `cutover worker` on the same task queue carries the
 * migration out, in its own state directory.
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { Api, demoApply, ServerHarness } from '../support/server.js';
import {
  startWorkerProcess,
  temporalAddress,
  uniqueTaskQueue,
  type WorkerProcess,
} from '../support/temporal-worker.js';

const servers = new ServerHarness();
let worker: WorkerProcess | null = null;
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
    const id = apply.json.migration.id as string;

    // Nobody runs it yet: no slot of it anywhere after a while, and it is not over.
    await sleep(1_500);
    expect(existsSync(path.join(stateDir, 'exec-demo'))).toBe(false);

    worker = await startWorkerProcess({ address, taskQueue });
    const done = await api.waitFor(id, (s) => s.endedAt !== null, 60_000);
    expect(done.lifecycle).toBe('completed');
    // The driver calls ran in the worker (the exec scripts write slots under its state directory).
    expect(readdirSync(path.join(worker.stateDir, 'exec-demo')).sort()).toEqual([`api-${id}`, `db-${id}`]);
    expect(existsSync(path.join(stateDir, 'exec-demo'))).toBe(false);
  }, 90_000);
});
