/**
 * Temporal mode, robustness: the Temporal server itself restarted in the middle of a migration. A
 * dev server of this test's own, on a fixed port, keeps its state in a database file; it is killed
 * while a health gate holds and started again on the same port with the same file. The worker that
 * was running stays up (the SDK retries its polls and heartbeats while the server is away) and goes
 * on by itself; the migration continues from where the server's history left it and completes.
 */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { TemporalMigrations } from '../../engine/temporal/temporal-migrations.js';
import { tempDir } from '../support/cli.js';
import {
  freePort,
  killRunners,
  releaseGate,
  slotDirs,
  type Workspace,
  workspace,
} from '../support/migrations.js';
import { type DevServer, startDevServer } from '../support/temporal.js';
import {
  connectClient,
  inGate,
  isFinalState,
  logText,
  migrateDetached,
  showJson,
  startWorkerProcess,
  type TemporalTarget,
  uniqueName,
  waitForState,
} from './robustness-helpers.js';

/** Kills the server with `signal` and waits for its exit. */
async function kill(server: DevServer, signal: NodeJS.Signals): Promise<void> {
  const child = server.process;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

// The two signals run at once: each has its own dev server (port and database file), worker,
// workspace and task queue, and cleans up only what it started when it ends.
describe('Temporal mode: the server restarted mid-migration (persistent database)', () => {
  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    it.concurrent(`${signal} while the gate holds, restart on the same port and file: the same worker carries on, the migration completes`, async ({
      onTestFinished,
    }) => {
      const cleanups: (() => Promise<void>)[] = [];
      onTestFinished(async () => {
        for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
      });
      const scratch = await tempDir('cutover-temporal-db-');
      cleanups.push(scratch.cleanup);
      const port = await freePort();
      const dbFile = path.join(scratch.dir, 'temporal.db');
      let server = await startDevServer({ port, dbFile });
      cleanups.push(() => server.stop());

      const t: TemporalTarget = { address: server.address, taskQueue: uniqueName('rb-restart') };
      const environment = uniqueName('rb-restart');
      const ws: Workspace = await workspace('test/fixtures/gated', (y) =>
        y.replace('name: gated', `name: ${environment}`),
      );
      cleanups.push(async () => {
        killRunners(ws.stateDir);
        await ws.cleanup();
      });
      const client: TemporalMigrations = await connectClient(t);
      cleanups.push(() => client.close());

      const worker = await startWorkerProcess(t, ws.stateDir);
      cleanups.push(() => worker.kill('SIGKILL'));
      const id = await migrateDetached(t, ws.file);
      await waitForState(client, id, inGate('api'), 20_000);
      await sleep(300);

      await kill(server, signal);
      // Down across at least one heartbeat (every 3 s) of the gate's call, and with the start of the
      // new server, longer than its 5 s heartbeat timeout.
      await sleep(4_000);
      expect(worker.running()).toBe(true);
      server = await startDevServer({ port, dbFile });
      expect(server.address).toBe(t.address);

      releaseGate(ws);
      const final = await waitForState(client, id, isFinalState, 45_000);
      expect(final.lifecycle).toBe('completed');
      // The worker started before the outage did all of it: it never exited.
      expect(worker.running()).toBe(true);

      const shown = await showJson(t, id);
      expect(shown.summary.lifecycle).toBe('completed');
      expect(slotDirs(ws)).toEqual([`api-${id}`, `db-${id}`]);
      expect(await logText(t, id)).toContain('health: gate passed');
      // The layout survived the restart too: the environment workflow has the new serial.
      expect((await client.currentLayout(environment)).serial).toBe(1);
      // Two dev server starts, a worker process and a migration: 19–23 s under load, past the
      // default 30 s once (session 15); its own waits allow up to 65 s.
    }, 90_000);
  }
});
