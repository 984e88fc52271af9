/**
 * The stateful switch on real redis-servers (the redis driver): an app in front of a redis, both
 * replaced (the app finds the redis of its own generation through a reference), the redis switched
 * under the router's write hold — blue fenced by CLIENT PAUSE WRITE, green catching up to blue's
 * offset read after the fence, promoted with REPLICAOF NO ONE, blue following it back until the
 * commit. A writer sends 200 uniquely keyed, acknowledged writes/s through the route all along
 * (each `MULTI; SET; RPUSH log; EXEC`, acknowledged once EXEC replied): migrate; migrate with
 * `commit: manual` and roll back from awaiting_commit; migrate and commit. After each: none
 * missing on the serving side, none twice in its log, no 5xx (nothing failed inside the hold).
 */

import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { stopProcessGroup } from '../../engine/drivers/process-group.js';
import { readCurrentLayout } from '../../engine/store/layout-store.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { repoRoot, runCli } from '../support/cli.js';
import {
  isFinal,
  migrateDetached,
  routeUrl,
  setVersion,
  type Workspace,
  waitFor,
  workspace,
} from '../support/migrations.js';
import { eventually } from '../support/wait.js';
import { percentile, startWriter, type WriteRecord } from '../support/writer.js';

let w: Workspace;
let url: string;

beforeAll(async () => {
  w = await workspace('test/fixtures/stateful-redis', (yaml) =>
    yaml.replace(
      'IOREDIS_MODULE: "ioredis"',
      `IOREDIS_MODULE: "${path.join(repoRoot, 'node_modules/ioredis/built/index.js')}"`,
    ),
  );
  url = routeUrl(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stdout + first.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  await runCli(['topology', 'down', '-f', w.file, '--yes']).catch(() => undefined);
  // A migration a failed test left running keeps its servers from `down`: stopped by their pids.
  const slots = path.join(w.stateDir, 'environments', 'kvshop', 'slots');
  for (const slot of existsSync(slots) ? readdirSync(slots) : []) {
    const record = path.join(slots, slot, 'server.json');
    if (!existsSync(record)) continue;
    const { pid, startTime } = JSON.parse(readFileSync(record, 'utf8')) as {
      pid: number;
      startTime: string | null;
    };
    await stopProcessGroup({ pid, startTime }, 1_000).catch(() => undefined);
  }
  await w.cleanup();
}, 60_000);

/** The serving app's log of keys (through the route) and the redis it uses. */
async function served(): Promise<{ version: string; server: string; keys: string[] }> {
  const res = await fetch(new URL('/keys', url));
  return (await res.json()) as { version: string; server: string; keys: string[] };
}

async function judge(records: WriteRecord[], label: string, version: string): Promise<void> {
  const acked = records.filter((r) => r.status === 200);
  const failed = records.filter((r) => r.status !== 200);
  const serving = await served();
  const stored = new Set(serving.keys);
  const missing = acked.filter((r) => !stored.has(r.key));
  const layout = await readCurrentLayout(StateDir.at(w.stateDir), 'kvshop');
  const ms = acked.map((r) => r.ms);
  console.log(
    `${label}: ${acked.length} acknowledged, ${missing.length} missing, ${failed.length} not acknowledged; log ${serving.keys.length} (distinct ${stored.size}); write latency p99 ${percentile(ms, 99)} ms, max ${Math.max(...ms)} ms`,
  );
  expect(serving.version).toBe(version);
  expect(serving.server).toBe(layout.slots?.cache?.addresses[0]);
  expect(missing.map((r) => r.key)).toEqual([]);
  expect(failed.map((r) => `${r.key}: ${r.status}`)).toEqual([]);
  expect(acked.length).toBeGreaterThan(100);
  expect(stored.size).toBe(serving.keys.length);
}

/** cache to its next version: app is replaced with it (its reference moves to the new redis). */
function bump(cacheVersion: string, appVersion: string): void {
  setVersion(w, 'cache', cacheVersion);
  setVersion(w, 'app', appVersion);
}

it('migrate: every acknowledged write is in green', async () => {
  bump('2', '2.0.0');
  // The plan says what the driver promises, and what it cannot carry.
  const plan = await runCli(['topology', 'plan', '-f', w.file]);
  expect(plan.stdout).toMatch(
    /Stateful: cache is switched under a write hold of at most 3s: .* Redis: a write counts once the server replied; the append-only file is fsync'd each second .* Lua script or MULTI\/EXEC that reaches blue while it is fenced waits, then is refused \(READONLY\)/,
  );
  const writer = startWriter(url, 200, 'a');
  const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  const records = await writer.stop();
  expect(result.code, result.stdout + result.stderr).toBe(0);
  const hold = /write hold ended after (\d+) ms: the held requests went to green/.exec(
    result.stdout + result.stderr,
  );
  expect(hold, result.stdout + result.stderr).not.toBeNull();
  console.log(`redis: the switch held writes ${hold?.[1]} ms`);
  await judge(records, 'redis: migrate 1 → 2', '2.0.0');
}, 90_000);

it('a rollback from awaiting_commit, after the switch: every write green took is in blue', async () => {
  bump('3', '3.0.0');
  writeFileSync(w.file, readFileSync(w.file, 'utf8').replace('commit: auto', 'commit: manual'));
  const writer = startWriter(url, 200, 'b');
  const id = await migrateDetached(w);
  const waiting = await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit' || isFinal(s), 60_000);
  expect(waiting.lifecycle, waiting.reason ?? '').toBe('awaiting_commit');
  // Green serves and takes writes (100 more at least) before the rollback.
  const atSwitch = await served();
  expect(atSwitch.version).toBe('3.0.0');
  const taken = (keys: string[]) => keys.filter((k) => k.startsWith('b-')).length;
  await eventually(async () => taken((await served()).keys) >= taken(atSwitch.keys) + 100, 30_000);
  const rollback = await runCli(['topology', 'migration', 'rollback', id, '-f', w.file]);
  expect(rollback.code, rollback.stdout + rollback.stderr).toBe(0);
  const ended = await waitFor(w, id, (s) => isFinal(s), 60_000);
  const records = await writer.stop();
  expect(ended.lifecycle, ended.reason ?? '').toBe('rolled_back');
  await judge(records, 'redis: rollback of 3 from awaiting_commit', '2.0.0');
}, 120_000);

it('the migration after a rollback, committed: nothing lost', async () => {
  const writer = startWriter(url, 200, 'c');
  const id = await migrateDetached(w);
  const waiting = await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit' || isFinal(s), 60_000);
  expect(waiting.lifecycle, waiting.reason ?? '').toBe('awaiting_commit');
  const commit = await runCli(['topology', 'migration', 'commit', id, '-f', w.file]);
  expect(commit.code, commit.stdout + commit.stderr).toBe(0);
  const ended = await waitFor(w, id, (s) => isFinal(s), 60_000);
  const records = await writer.stop();
  expect(ended.lifecycle, ended.reason ?? '').toBe('completed');
  await judge(records, 'redis: migrate to 3, committed', '3.0.0');
}, 120_000);

it('a green that lags holds the gate and fails at replicate.timeout naming the lag; blue serves, nothing lost', async () => {
  const live = (await served()).version;
  bump('4', '4.0.0');
  // Green cache's health check waits for a file the test makes once green is paused: the gate's lag
  // check comes after it (a gate that passed before the pause landed made this a switch failure).
  const gateFile = path.join(w.dir, 'cache-gate-open');
  const tcpHealth = '      tcp: {}\n      interval: 100ms\n';
  const fileHealth = `      command: [sh, -c, "test -e ${gateFile}"]\n      interval: 200ms\n      failureThreshold: 100\n`;
  const text = readFileSync(w.file, 'utf8');
  expect(text).toContain(tcpHealth);
  writeFileSync(w.file, text.replace('timeout: 30s', 'timeout: 3s').replace(tcpHealth, fileHealth));
  const writer = startWriter(url, 200, 'd');
  const id = await migrateDetached(w);
  // Green's server, once it answers, stops applying what it receives (a paused server does not).
  const record = path.join(w.stateDir, 'environments', 'kvshop', 'slots', `cache-${id}`, 'server.json');
  let port = 0;
  await eventually(() => {
    port = existsSync(record)
      ? ((JSON.parse(readFileSync(record, 'utf8') || '{}') as { port?: number }).port ?? 0)
      : 0;
    return port > 0;
  }, 60_000);
  const green = new Redis({ host: '127.0.0.1', port, retryStrategy: (n) => (n > 50 ? null : 20) });
  green.on('error', () => {});
  try {
    await green.call('CLIENT', 'PAUSE', '15000', 'WRITE');
    writeFileSync(gateFile, '');
    const ended = await waitFor(w, id, (s) => isFinal(s), 60_000);
    const records = await writer.stop();
    console.log(`redis: a lagging green: ${ended.lifecycle}: ${ended.reason}`);
    expect(ended.reason).toMatch(
      /replication of cache lagging: green trails blue by .*more than replicate\.maxLag 1s, for all of replicate\.timeout 3s/,
    );
    await judge(records, 'redis: a lagging green', live);
  } finally {
    green.disconnect();
  }
}, 120_000);
