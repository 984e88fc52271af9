/**
 * WebSockets through a migration and a rollback (issue 31, item 3): a real WebSocket app on the
 * process driver behind the real router, 200 WebSocket clients exchanging messages beside 500
 * plain HTTP requests/s. Each WebSocket stays on the slot that greeted it; the drain waits for
 * blue's (and a rollback's for green's) up to the route's drain.timeout, then the router closes
 * them with 1001 and they come back on the live slot. Nothing fails.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { routerClient } from '../../router/client.js';
import { repoRoot, runBinary, runCli, tempDir } from '../support/cli.js';
import { loadAnswers, minSentShare, sentRate, startTestLoad } from '../support/load.js';
import { freePort, killRunners, killSlots, waitFor } from '../support/migrations.js';
import { eventually } from '../support/wait.js';
import { type FleetConnection, WsFleet } from '../support/ws-fleet.js';

const rate = 500;
const sockets = 200;
const drainMs = 3_000;
const app = path.join(repoRoot, 'test', 'fixtures', 'ws-app', 'app.mjs');

function topology(listen: string, version: string, shift: string): string {
  return `apiVersion: cutover/v1
kind: Topology
metadata: { name: ws-demo }
drivers:
  apps: { type: process, stopTimeout: 5s }
components:
  web:
    driver: apps
    version: "${version}"
    run: { command: [node, ${JSON.stringify(app)}] }
    replicas: 1
    health: { http: { path: /healthz }, interval: 200ms, successThreshold: 2, failureThreshold: 3, deadline: 15s }
routes:
  www:
    listen: ${listen}
    to: web
    shift: ${shift}
    drain: { timeout: ${drainMs}ms }
`;
}

/** When the route's drain of `slot` began, from the line the migration logged at its end. */
function drainStart(stateDir: string, id: string, slot: 'blue' | 'green'): { at: number; message: string } {
  const file = path.join(stateDir, 'environments', 'ws-demo', 'migrations', id, 'log.ndjson');
  for (const line of readFileSync(file, 'utf8').trim().split('\n')) {
    const { at, message } = JSON.parse(line) as { at: number; message: string };
    const drained = new RegExp(`^route www: ${slot} web drained in (\\d+) ms`).exec(message);
    if (drained) return { at: at - Number(drained[1]), message };
  }
  throw new Error(`no drain of ${slot} in ${file}`);
}

/** Every connection greeted by `version` was closed by the router's 1001 no sooner than `notBefore`. */
function closedAfterDrain(connections: FleetConnection[], version: string, notBefore: number): void {
  const theirs = connections.filter((c) => c.version === version);
  expect(theirs.length).toBeGreaterThan(0);
  for (const c of theirs) {
    expect(c.code).toBe(1001);
    expect(c.closedAt).toBeGreaterThanOrEqual(notBefore);
  }
}

it('keeps 200 WebSockets through a migration and a rollback at 500 requests/s: 0 failed, 1001 only after the drain timeout, none on the wrong slot', async (t) => {
  const { dir, cleanup } = await tempDir('cutover-ws-');
  const file = path.join(dir, 'topology.yaml');
  const stateDir = path.join(dir, '.cutover');
  t.onTestFinished(async () => {
    await runCli(['topology', 'down', '-f', file, '--yes']).catch(() => undefined);
    killSlots(stateDir);
    killRunners(stateDir);
    await cleanup();
  });
  const listen = `127.0.0.1:${await freePort()}`;
  writeFileSync(file, topology(listen, '1.0.0', '[100]'));
  expect((await runCli(['topology', 'migrate', '-f', file, '--yes'])).code).toBe(0);

  const fleet = new WsFleet(`ws://${listen}/`, sockets, 1_000);
  await eventually(() => fleet.openByVersion()['1.0.0'] === sockets, 30_000);
  const load = startTestLoad({ url: `http://${listen}/`, rate });
  await loadAnswers(load, 50);

  // The migration: every WebSocket on blue stays there until the drain timeout, then moves.
  writeFileSync(file, topology(listen, '2.0.0', '[100]'));
  const migrated = await runBinary(['topology', 'migrate', '-f', file, '--yes']);
  expect(migrated.code, migrated.stderr).toBe(0);
  const id = /^(mig_[0-9a-z]+): completed$/m.exec(migrated.stdout)?.[1] as string;
  await eventually(() => fleet.openByVersion()['2.0.0'] === sockets, 30_000);
  const blueDrain = drainStart(stateDir, id, 'blue');
  expect(blueDrain.message).toContain(
    `${sockets} upgraded connections (WebSockets) still open at the drain timeout closed (1001`,
  );

  // The rollback: WebSockets opened on green during a 50 % hold go back to blue the same way.
  writeFileSync(file, topology(listen, '3.0.0', '[{ weight: 50, hold: 60s }, 100]'));
  const started = await runCli(['topology', 'migrate', '-f', file, '--yes', '--detach']);
  const rollbackId = started.stdout.trim();
  await eventually(
    async () => (await routerClient(stateDir).routes()).routes['ws-demo/www']?.greenPercent === 50,
    30_000,
  );
  const during = new WsFleet(`ws://${listen}/`, 50, 1_000);
  await eventually(() => Object.values(during.openByVersion()).reduce((a, b) => a + b, 0) === 50, 30_000);
  expect(during.openByVersion()['3.0.0']).toBeGreaterThan(0);
  // It waits for the end: traffic back to blue, green's routes drained, green retired.
  const rolledBack = await runCli(['topology', 'migration', 'rollback', rollbackId, '-f', file]);
  expect(rolledBack.code, rolledBack.stderr).toBe(0);
  await waitFor({ dir, file, stateDir, cleanup }, rollbackId, (s) => s.lifecycle === 'rolled_back', 60_000);
  await eventually(() => during.openByVersion()['2.0.0'] === 50, 30_000);
  const greenDrain = drainStart(stateDir, rollbackId, 'green');

  const endedAt = Date.now();
  await loadAnswers(load, 100, endedAt);
  const run = await load.stop();
  const [main, extra] = await Promise.all([fleet.stop(), during.stop()]);

  expect(run.failed).toBe(0);
  expect(sentRate(run)).toBeGreaterThanOrEqual(rate * minSentShare);
  expect([...main.failures, ...extra.failures]).toEqual([]);
  closedAfterDrain(main.connections, '1.0.0', blueDrain.at + drainMs);
  closedAfterDrain(extra.connections, '3.0.0', greenDrain.at + drainMs);
  // Blue's 2.0.0 stayed open through the rollback, until the test closed them.
  for (const c of main.connections.filter((c) => c.version === '2.0.0')) expect(c.code).toBe(1000);
  console.log(
    `websockets: ${main.connections.length + extra.connections.length} connections, ${main.echoes + extra.echoes} echoes, ${main.resent + extra.resent} resent after 1001; http: ${run.records.length} requests, ${Math.round(sentRate(run))}/s`,
  );
}, 120_000);
