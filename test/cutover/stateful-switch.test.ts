/**
 * Issue 28: a stateful component switched under the router's write hold loses no acknowledged
 * write: on a migration, on a rollback from awaiting_commit (after the switch), and on the
 * migration after it. A key store whose state is a file (the process driver's `replicate.dataDir`),
 * the real router, the real CLI; a writer sends uniquely keyed writes at 200/s all along.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
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
import { percentile, startWriter, storedKeys, type WriteRecord } from '../support/writer.js';

let w: Workspace;
let url: string;

beforeAll(async () => {
  w = await workspace('test/fixtures/stateful-kv');
  url = routeUrl(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stdout + first.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  await runCli(['topology', 'down', '-f', w.file, '--yes']).catch(() => undefined);
  await w.cleanup();
}, 60_000);

/** Every acknowledged write is on the serving side; the hold's figures for the log. */
async function judge(records: WriteRecord[], label: string, version: string): Promise<void> {
  const acked = records.filter((r) => r.status === 200);
  const stored = await storedKeys(url);
  expect(stored.version).toBe(version);
  const missing = acked.filter((r) => !stored.keys.has(r.key));
  const failed = records.filter((r) => r.status !== 200);
  const ms = acked.map((r) => r.ms);
  console.log(
    `${label}: ${acked.length} acknowledged, ${missing.length} missing, ${failed.length} not acknowledged (${[...new Set(failed.map((r) => r.status))].join(', ')}); write latency p99 ${percentile(ms, 99)} ms, max ${Math.max(...ms)} ms`,
  );
  expect(missing.map((r) => r.key)).toEqual([]);
  expect(failed.filter((r) => r.status >= 500 || r.status === 0)).toEqual([]);
  expect(acked.length).toBeGreaterThan(50);
  // How long writes waited (the hold's p99 ≤ 1 s and max ≤ 2 s) is a benchmark's figure, judged in
  // bench/stateful-bench.js: on a loaded test machine the app's own latency is most of it.
}

it('migrate: every acknowledged write reaches green', async () => {
  setVersion(w, 'store', '2.0.0');
  const writer = startWriter(url, 200, 'a');
  const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  const records = await writer.stop();
  expect(result.code, result.stdout + result.stderr).toBe(0);
  expect(result.stdout + result.stderr).toMatch(
    /write hold ended after \d+ ms: the held requests went to green/,
  );
  await judge(records, 'migrate 1.0.0 → 2.0.0', '2.0.0');
}, 90_000);

it('a rollback from awaiting_commit, after the switch: every write green took reaches blue', async () => {
  setVersion(w, 'store', '3.0.0');
  writeFileSync(w.file, readFileSync(w.file, 'utf8').replace('commit: auto', 'commit: manual'));
  const writer = startWriter(url, 200, 'b');
  const id = await migrateDetached(w);
  const waiting = await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit' || isFinal(s), 60_000);
  expect(waiting.lifecycle, waiting.reason ?? '').toBe('awaiting_commit');
  // Green serves (the routes are at 100 % green while it waits), and takes writes before the rollback.
  const greenSince = Date.now();
  await eventually(() => writer.acknowledgedSince(greenSince) >= 100, 20_000);
  const rollback = await runCli(['topology', 'migration', 'rollback', id, '-f', w.file]);
  expect(rollback.code, rollback.stdout + rollback.stderr).toBe(0);
  const ended = await waitFor(w, id, (s) => isFinal(s), 60_000);
  const records = await writer.stop();
  expect(ended.lifecycle).toBe('rolled_back');
  await judge(records, 'rollback of 3.0.0 from awaiting_commit', '2.0.0');
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
  expect(ended.lifecycle).toBe('completed');
  await judge(records, 'migrate to 3.0.0, committed', '3.0.0');
}, 120_000);
