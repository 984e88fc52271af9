/**
 * A client that hangs up while the server is still looking up the migration (before the stream
 * starts) leaves nothing behind: no stream slot, no shared reader, no heartbeat. The server runs
 * in process with its real routes and a real local state directory (a migration in a ten-minute
 * bake); only the migration lookup is held back, so that the hang-up lands inside it.
 */

import { request } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { noSecrets } from '../../engine/secrets/secret-source.js';
import { localService } from '../../engine/services/migration-service.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { buildServer, type CutoverServer } from '../../server/app.js';
import { repoRoot } from '../support/cli.js';
import { Api, demoApply, ServerHarness } from '../support/server.js';

const harness = new ServerHarness();
let server: CutoverServer;
let api: Api;
let url: string;
let migrationId: string;

/** When set, `find` waits for it: the lookup the route makes before the stream starts. */
let held: { entered: () => void; release: Promise<void> } | null = null;

beforeAll(async () => {
  const stateDir = StateDir.at(await harness.stateDir());
  const local = localService(stateDir, noSecrets);
  server = await buildServer({
    stateDir,
    workdir: repoRoot,
    tokens: null,
    rateLimitPerMinute: 0,
    logLevel: 'silent',
    version: '0.0.0-test',
    service: {
      ...local,
      async find(prefix) {
        const hold = held;
        if (hold) {
          hold.entered();
          await hold.release;
        }
        return local.find(prefix);
      },
    },
  });
  await server.app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
  api = await Api.connect(url);
  const r = await api.post('/v1/apply', demoApply({ name: 'hangup', bake: '10m', commit: 'auto' }));
  expect(r.status, r.text).toBe(202);
  migrationId = r.json.summary.id as string;
  await api.waitFor(migrationId, (s) => s.status.includes('bake'));
}, 60_000);

afterAll(async () => {
  try {
    if (migrationId) await api.cancelAndWait(migrationId);
  } finally {
    await server?.close();
    await harness.cleanup();
  }
}, 60_000);

it('a client that hangs up before its stream starts frees its slot and the reader', async () => {
  let release = () => {};
  const entered = new Promise<void>((resolve) => {
    held = { entered: resolve, release: new Promise<void>((r) => (release = r)) };
  });
  // The server's end of the stream's connection (the only one opened meanwhile), and its close.
  const serverSideClosed = new Promise<void>((resolve) =>
    server.app.server.once('connection', (socket: Socket) => socket.once('close', () => resolve())),
  );
  const { port } = new URL(url);
  const req = request({
    host: '127.0.0.1',
    port,
    path: `/v1/migrations/${migrationId}/logs?follow=true`,
    agent: false,
  });
  req.on('error', () => undefined); // the hang-up below
  req.end();
  await entered;
  held = null;
  req.destroy();
  await serverSideClosed;
  release();
  // The route resumes after the lookup (a microtask); the metrics request below comes after it.
  await new Promise((resolve) => setImmediate(resolve));
  await api.gaugeReaches('cutover_log_streams', 0);
  await api.gaugeReaches('cutover_log_readers', 0);
}, 30_000);
