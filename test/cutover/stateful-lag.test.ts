/**
 * Issue 28, items 2 and 7: the replication lag of a switched component is shown live while the
 * health gate waits on it (`migration show`, `topology status`, the router's `/metrics`), the gate
 * says `replication_lagging` once for the episode (and `replication_caught_up` when it ends), and a
 * notification receiver hears of the episode and of the write hold (held count and duration).
 *
 * Real processes (the kv fixture), the real router and a real receiver on loopback. The follower is
 * the process driver's own dataDir copy made continuous by the test (a copy every 100 ms, the lag
 * being the age of what green holds), and held back at first: a subscriber too slow to keep up,
 * which the test then lets go.
 */

import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { MigrationState } from '../../core/migration/types.js';
import { defaultDrivers } from '../../engine/drivers/default-drivers.js';
import type { DriverSet } from '../../engine/drivers/driver-set.js';
import type { ComponentDriver, Replicator } from '../../engine/drivers/types.js';
import { followEvents } from '../../engine/notify/event-feed.js';
import { LocalRunner } from '../../engine/runner/local-runner.js';
import { processSecrets } from '../../engine/secrets/secret-source.js';
import { createMigration } from '../../engine/services/migrations.js';
import { topologySource } from '../../engine/sources/topology-source.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { liveRouterRecord } from '../../router/router-record.js';
import { runCli } from '../support/cli.js';
import { routeUrl, setVersion, type Workspace, workspace } from '../support/migrations.js';
import { startInProcess } from '../support/server-in-process.js';
import { startWriter } from '../support/writer.js';

interface Received {
  type: string;
  data: Record<string, unknown>;
}

/** The webhook's signing key (notify targets of type webhook sign every delivery). */
const hookEnv = { CUTOVER_SECRET_HOOK_KEY: 'test-signing-key-28' };
const secrets = processSecrets(hookEnv);

let w: Workspace;
let seededAt = 0;
let url: string;
let receiver: http.Server;
const received: Received[] = [];
const runners: LocalRunner[] = [];
/** Followers' loops still copying (a migration that failed before its fence): stopped at the end. */
const followers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    req.on('end', () => {
      received.push(JSON.parse(body) as Received);
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const port = (receiver.address() as AddressInfo).port;
  w = await workspace('test/fixtures/stateful-kv');
  url = routeUrl(w);
  const text = readFileSync(w.file, 'utf8')
    .replace(
      'replicate: { dataDir: ".", writeHold: 2s }',
      'replicate: { dataDir: ".", writeHold: 2s, maxLag: 200ms, timeout: 30s }',
    )
    .concat(
      `notify:\n  ops:\n    type: webhook\n    url: http://127.0.0.1:${port}/hook\n    signingSecret: { secret: HOOK_KEY }\n`,
    );
  writeFileSync(w.file, text);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes'], { env: hookEnv });
  expect(first.code, first.stdout + first.stderr).toBe(0);
  // Blue's first write: green, which copies nothing until let go, trails blue by its age.
  const seed = await fetch(`${url}put?k=seed`, { method: 'POST' });
  expect(seed.status).toBe(200);
  seededAt = Date.now();
}, 60_000);

afterAll(async () => {
  for (const runner of runners) runner.detach();
  for (const stop of followers) await stop();
  await runCli(['topology', 'down', '-f', w.file, '--yes'], { env: hookEnv }).catch(() => undefined);
  await w.cleanup();
  receiver.closeAllConnections();
  await new Promise((resolve) => receiver.close(resolve));
}, 60_000);

/**
 * The real drivers, with the process driver's dataDir copy following continuously once `letGo`
 * is called (before: no copy at all, green's data directory stays empty). Its lag is measured on
 * the real directories: none when green holds blue's very content, else the age of the oldest
 * write green may lack (the time since the copy its content comes from began; before any copy,
 * since blue's first write).
 */
function slowFollower(): { drivers: DriverSet; letGo: () => void } {
  const drivers = defaultDrivers();
  const process = drivers.component.process as ComponentDriver;
  const copy = process.replication as Replicator;
  let released = false;
  let since = seededAt;
  let loop: Promise<void> | null = null;
  let stopped = false;
  const wrapped: Replicator = {
    ...copy,
    capabilities: { ...copy.capabilities, follow: true, lag: true },
    follow: async (ctx, from, to, options) => {
      loop = (async () => {
        while (!stopped) {
          if (released) {
            const began = Date.now();
            await copy.follow(ctx, from, to, options);
            since = began;
          }
          await sleep(100);
        }
      })();
    },
    lag: async (ctx, from, to, options) => {
      const lag = await copy.lag(ctx, from, to, options);
      return lag.bytes === 0 ? { ...lag, ms: 0 } : { ...lag, ms: Date.now() - since };
    },
    // Under the hold, the final sync is the copy's own (catchUp): the follower stops first.
    fence: async (...args) => {
      await stop();
      return copy.fence(...args);
    },
  };
  const stop = async () => {
    stopped = true;
    await loop;
  };
  followers.push(stop);
  if (copy.supports) wrapped.supports = copy.supports;
  return {
    drivers: {
      ...drivers,
      component: { ...drivers.component, process: { ...process, replication: wrapped } },
    },
    letGo: () => {
      released = true;
    },
  };
}

/** Polls `look` (every 200 ms: each look runs the CLI) until it finds something; throws past `timeoutMs`. */
async function found<T>(
  look: () => Promise<T | undefined>,
  timeoutMs: number,
  context = () => '',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await look();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`not found within ${timeoutMs} ms: ${context()}`);
    await sleep(200);
  }
}

async function metricsText(): Promise<string> {
  const record = liveRouterRecord(w.stateDir);
  if (!record) throw new Error('no router running');
  const res = await fetch(`http://127.0.0.1:${record.port}/metrics`);
  return res.text();
}

it('a lagging green holds the gate: the lag is shown live, said once, and the hold is notified', async () => {
  setVersion(w, 'store', '2.0.0');
  const writer = startWriter(url, 50, 'lag');
  const stateDir = StateDir.at(w.stateDir);
  const created = await createMigration({
    source: topologySource({ text: readFileSync(w.file, 'utf8'), file: w.file }),
    stateDir,
    secrets,
  });
  if (!created.created) throw new Error('nothing to migrate');
  const { id, environment } = created.spec;
  const follower = slowFollower();
  const runner = LocalRunner.recover(stateDir, environment, id, {
    stateDir,
    drivers: follower.drivers,
    secrets,
  });
  runners.push(runner);

  // While the gate waits: `migration show --json` has the figure, waiting, over maxLag.
  const shown = await found(
    async () => {
      const result = await runCli(['topology', 'migration', 'show', id, '-f', w.file, '--json']);
      const summary = (JSON.parse(result.stdout) as { summary: { replication?: Record<string, unknown>[] } })
        .summary;
      const figure = summary.replication?.[0];
      return figure?.waiting === true && (figure.lagMs as number) > 1_000 ? figure : undefined;
    },
    30_000,
    () => `${runner.current.lifecycle}\n${readFileSync(stateDir.migration(environment, id).log, 'utf8')}`,
  );
  expect(shown).toMatchObject({ component: 'store', maxLagMs: 200, waiting: true });
  expect(Date.now() - Date.parse(shown.measuredAt as string)).toBeLessThan(10_000);
  const human = await runCli(['topology', 'migration', 'show', id, '-f', w.file]);
  expect(human.stdout).toMatch(
    /lag: +store: green trails blue by \d+(\.\d+)?s.*\(maxLag 200ms\), measured .*; the gate waits/,
  );

  // `topology status`, text and JSON.
  const status = await runCli(['topology', 'status', '-f', w.file]);
  expect(status.stdout).toMatch(/lag: +store: green trails blue by .*the gate waits/);
  const statusJson = await runCli(['topology', 'status', '-f', w.file, '--json']);
  const inFlight = (JSON.parse(statusJson.stdout) as { migration: { replication?: { waiting: boolean }[] } })
    .migration;
  expect(inFlight.replication?.[0]?.waiting).toBe(true);

  // The API: the migration and its environment, from a server on the same state directory.
  const server = await startInProcess({ stateDir: w.stateDir, workdir: w.dir, args: ['--no-adopt'] });
  try {
    const detail = await server.app.inject({ method: 'GET', url: `/v1/migrations/${id}` });
    expect(detail.statusCode, detail.body).toBe(200);
    const apiFigure = (detail.json() as { summary: { replication?: Record<string, unknown>[] } }).summary
      .replication?.[0];
    expect(apiFigure).toMatchObject({ component: 'store', maxLagMs: 200, waiting: true });
    expect(typeof apiFigure?.measuredAt).toBe('string');
    const environmentStatus = await server.app.inject({ method: 'GET', url: '/v1/environments/kv' });
    expect(environmentStatus.statusCode, environmentStatus.body).toBe(200);
    const apiInFlight = (environmentStatus.json() as { migration: { replication?: { waiting: boolean }[] } })
      .migration;
    expect(apiInFlight.replication?.[0]?.waiting).toBe(true);
  } finally {
    await server.close();
  }

  // The router's /metrics.
  const metrics = await found(async () => {
    const text = await metricsText();
    return /cutover_replication_gate_waiting\{environment="kv",component="store"\} 1/.test(text)
      ? text
      : undefined;
  }, 10_000);
  const lagSeconds = Number(
    /cutover_replication_lag_seconds\{environment="kv",component="store"\} ([0-9.]+)/.exec(metrics)?.[1],
  );
  expect(lagSeconds).toBeGreaterThan(0.2);
  expect(metrics).toMatch(/cutover_replication_max_lag_seconds\{environment="kv",component="store"\} 0.2/);

  // The follower keeps up from now on: the gate passes, the switch runs under the hold.
  follower.letGo();
  const final: MigrationState = await runner.done();
  await runner.deliveries();
  const records = await writer.stop();
  expect(final.lifecycle, final.ending?.reason).toBe('completed');
  expect(records.filter((r) => r.status !== 200)).toEqual([]);

  const log = readFileSync(stateDir.migration(environment, id).log, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { kind: string; message: string });
  const lagging = log.filter((l) => l.kind === 'replication_lagging');
  expect(lagging).toHaveLength(1);
  expect(lagging[0]?.message).toMatch(/green store trails blue by \d+(\.\d+)?m?s.*more than maxLag 200ms/);
  expect(log.filter((l) => l.kind === 'replication_caught_up')).toHaveLength(1);

  // The receiver: the episode, and the write hold with its count and duration.
  const byType = (name: string) => received.filter((e) => e.type === `dev.cutover.migration.${name}`);
  expect(byType('replication_lagging')).toHaveLength(1);
  expect(byType('replication_lagging')[0]?.data).toMatchObject({
    component: 'store',
    lag: { maxLagMs: 200 },
    severity: 'warning',
  });
  expect(byType('replication_caught_up')).toHaveLength(1);
  expect(byType('write_hold_started')).toHaveLength(1);
  expect(byType('write_hold_started')[0]?.data.hold).toMatchObject({
    routes: ['www'],
    from: 'blue',
    budgetMs: 2_000,
  });
  const ended = byType('write_hold_ended');
  expect(ended).toHaveLength(1);
  const hold = ended[0]?.data.hold as { releasedTo: string; durationMs: number; heldCount: number };
  expect(hold.releasedTo).toBe('green');
  expect(hold.durationMs).toBeGreaterThanOrEqual(0);
  expect(hold.durationMs).toBeLessThan(2_000);
  expect(typeof hold.heldCount).toBe('number');
  console.log(
    `write hold: ${hold.heldCount} held for ${hold.durationMs} ms; lag at the gate ${lagSeconds} s`,
  );

  // The events feed (what the server's GET /v1/events streams) tells the same events.
  const feed = new AbortController();
  const streamed: string[] = [];
  for await (const event of followEvents(stateDir, { signal: feed.signal, after: `${id}.1.0` })) {
    streamed.push(event.data.event);
    if (event.data.event === 'completed') feed.abort();
  }
  expect(streamed).toEqual(
    expect.arrayContaining([
      'replication_lagging',
      'replication_caught_up',
      'write_hold_started',
      'write_hold_ended',
    ]),
  );

  // After the migration, show carries no live figure.
  const after = await runCli(['topology', 'migration', 'show', id, '-f', w.file, '--json']);
  expect(
    (JSON.parse(after.stdout) as { summary: { replication?: unknown } }).summary.replication,
  ).toBeUndefined();
}, 90_000);
