/**
 * Issue 28 on real PostgreSQL: an api in front of a database, both replaced (the api finds the
 * database of its own generation through a reference), the database switched under the router's
 * write hold — blue fenced by its role's default_transaction_read_only, green catching up by
 * logical replication, promoted with its sequences set from the data, and replicating back to blue
 * until the commit. A writer sends 200 uniquely keyed, acknowledged inserts/s through the route all
 * along: migrate; migrate with `commit: manual` and roll back from awaiting_commit; migrate and
 * commit; a long write transaction on blue; a throttled green that holds the health gate until
 * replicate.timeout. After each: none missing on the serving side, no 5xx, no duplicate key, and
 * the sequence ahead of its column. Real clusters (Debian's PostgreSQL 15, run as the `postgres` user when the
 * tests run as root), the real router and CLI.
 */
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { readCurrentLayout } from '../../engine/store/layout-store.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { routerClient } from '../../router/client.js';
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
import { startWriter, storedKeys, type WriteRecord } from '../support/writer.js';

let w: Workspace;
let url: string;

beforeAll(async () => {
  w = await workspace('test/fixtures/stateful-pg', (yaml) =>
    yaml.replace('PG_MODULE: "pg"', `PG_MODULE: "${path.join(repoRoot, 'node_modules/pg/lib/index.js')}"`),
  );
  // The clusters run as another user, who must reach their directories under it.
  chmodSync(w.dir, 0o711);
  url = routeUrl(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stdout + first.stderr).toBe(0);
}, 120_000);

afterAll(async () => {
  await runCli(['topology', 'down', '-f', w.file, '--yes']).catch(() => undefined);
  await w.cleanup();
}, 120_000);

/** The serving database's rows: count, distinct keys, the largest id and the sequence's value. */
async function database(): Promise<{ rows: number; keys: number; maxId: number; sequence: number }> {
  const layout = await readCurrentLayout(StateDir.at(w.stateDir), 'pgshop');
  const address = layout.slots?.db?.addresses[0] as string;
  const client = new pg.Client({ connectionString: `postgres://app@${address}/app` });
  await client.connect();
  try {
    const counts = await client.query(
      'SELECT count(*)::int AS rows, count(DISTINCT k)::int AS keys, coalesce(max(id), 0)::int AS max_id FROM items',
    );
    const sequence = await client.query('SELECT last_value::int AS value FROM items_id_seq');
    const row = counts.rows[0] as { rows: number; keys: number; max_id: number };
    return {
      rows: row.rows,
      keys: row.keys,
      maxId: row.max_id,
      sequence: (sequence.rows[0] as { value: number }).value,
    };
  } finally {
    await client.end();
  }
}

async function judge(records: WriteRecord[], label: string, version: string): Promise<void> {
  const acked = records.filter((r) => r.status === 200);
  const stored = await storedKeys(url);
  const db = await database();
  const missing = acked.filter((r) => !stored.keys.has(r.key));
  const failed = records.filter((r) => r.status !== 200);
  console.log(
    `${label}: ${acked.length} acknowledged, ${missing.length} missing, ${failed.length} not acknowledged; rows ${db.rows} (distinct ${db.keys}), max id ${db.maxId}, sequence ${db.sequence}`,
  );
  expect(stored.version).toBe(version);
  expect(missing.map((r) => r.key)).toEqual([]);
  expect(failed.map((r) => `${r.key}: ${r.status}`)).toEqual([]);
  expect(acked.length).toBeGreaterThan(100);
  expect(db.keys).toBe(db.rows);
  expect(db.sequence).toBeGreaterThanOrEqual(db.maxId);
}

/** db to `db`'s next version: api is replaced with it (its reference moves to the new db). */
function bump(dbVersion: string, apiVersion: string): void {
  setVersion(w, 'db', dbVersion);
  setVersion(w, 'api', apiVersion);
}

it('migrate: every acknowledged insert is in green', async () => {
  bump('2', '2.0.0');
  const writer = startWriter(url, 200, 'a');
  const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  const records = await writer.stop();
  expect(result.code, result.stdout + result.stderr).toBe(0);
  expect(result.stdout + result.stderr).toMatch(
    /write hold ended after \d+ ms: the held requests went to green/,
  );
  await judge(records, 'postgres: migrate 1 → 2', '2.0.0');
}, 180_000);

it('a rollback from awaiting_commit, after the switch: every insert green took is in blue', async () => {
  bump('3', '3.0.0');
  writeFileSync(w.file, readFileSync(w.file, 'utf8').replace('commit: auto', 'commit: manual'));
  const writer = startWriter(url, 200, 'b');
  const id = await migrateDetached(w);
  const waiting = await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit' || isFinal(s), 120_000);
  expect(waiting.lifecycle, waiting.reason ?? '').toBe('awaiting_commit');
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const rollback = await runCli(['topology', 'migration', 'rollback', id, '-f', w.file]);
  expect(rollback.code, rollback.stdout + rollback.stderr).toBe(0);
  const ended = await waitFor(w, id, (s) => isFinal(s), 120_000);
  const records = await writer.stop();
  expect(ended.lifecycle, ended.reason ?? '').toBe('rolled_back');
  await judge(records, 'postgres: rollback of 3 from awaiting_commit', '2.0.0');
}, 240_000);

it('the migration after a rollback, committed: nothing lost', async () => {
  const writer = startWriter(url, 200, 'c');
  const id = await migrateDetached(w);
  const waiting = await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit' || isFinal(s), 120_000);
  expect(waiting.lifecycle, waiting.reason ?? '').toBe('awaiting_commit');
  const commit = await runCli(['topology', 'migration', 'commit', id, '-f', w.file]);
  expect(commit.code, commit.stdout + commit.stderr).toBe(0);
  const ended = await waitFor(w, id, (s) => isFinal(s), 120_000);
  const records = await writer.stop();
  expect(ended.lifecycle, ended.reason ?? '').toBe('completed');
  await judge(records, 'postgres: migrate to 3, committed', '3.0.0');
}, 240_000);

it('a write transaction held open on blue past the hold budget: the switch is undone, blue serves, nothing lost, the reason names it', async () => {
  const live = (await storedKeys(url)).version;
  bump('4', '4.0.0');
  // Green api's health gate waits for a file the test makes: by then green db passed its gate (its
  // initial copy done: a write transaction open on blue before would hold up the replication
  // slots' start, the subscription's and its table copies', and so the gate, not the fence).
  const gateFile = path.join(w.dir, 'api-gate-open');
  const httpHealth = '      http: { path: /healthz }\n      interval: 100ms\n';
  const fileHealth = `      command: [sh, -c, "test -e ${gateFile}"]\n      interval: 300ms\n      failureThreshold: 100\n`;
  writeFileSync(
    w.file,
    readFileSync(w.file, 'utf8').replace('commit: manual', 'commit: auto').replace(httpHealth, fileHealth),
  );
  const layout = await readCurrentLayout(StateDir.at(w.stateDir), 'pgshop');
  const blue = new pg.Client({ connectionString: `postgres://app@${layout.slots?.db?.addresses[0]}/app` });
  await blue.connect();
  try {
    const writer = startWriter(url, 200, 'd');
    const id = await migrateDetached(w);
    // Green db is caught up and green api's gate waits: a write transaction begins on blue and stays open.
    await eventually(async () => {
      const logs = await runCli(['topology', 'migration', 'logs', id, '-f', w.file]);
      return logs.stdout.includes('health_gate:api');
    }, 120_000);
    await blue.query('BEGIN');
    await blue.query(`INSERT INTO items (k) VALUES ('long-transaction')`);
    writeFileSync(gateFile, '');
    // The switch is undone within its budget, naming the transaction; the transaction ends later
    // (dropping what replication made on blue waits for it).
    const undone = await waitFor(w, id, (s) => /transaction/.test(s.reason ?? '') || isFinal(s), 120_000);
    expect(undone.reason).toMatch(/could not be fenced: a write transaction of app is still open \(pid \d+/);
    await blue.query('ROLLBACK');
    const ended = await waitFor(w, id, (s) => isFinal(s), 120_000);
    const records = await writer.stop();
    expect(ended.lifecycle).toBe('failed');
    expect(ended.reason).toMatch(/transaction/);
    console.log(`postgres: a long transaction on blue: ${ended.reason}`);
    await judge(records, 'postgres: a long transaction on blue', live);
  } finally {
    await blue.query('ROLLBACK').catch(() => undefined);
    await blue.end();
    writeFileSync(w.file, readFileSync(w.file, 'utf8').replace(fileHealth, httpHealth));
  }
}, 240_000);

/** A client of the serving (blue) database as `user`, run through `use` and closed. */
async function onLive<T>(user: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const layout = await readCurrentLayout(StateDir.at(w.stateDir), 'pgshop');
  const client = new pg.Client({
    connectionString: `postgres://${user}@${layout.slots?.db?.addresses[0]}/app`,
  });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

it('a lagging green (a throttled subscriber) holds the gate and fails at replicate.timeout naming the lag; released, the next migration completes', async () => {
  const live = (await storedKeys(url)).version;
  // The throttle: each row the replication workers write takes 50 ms (a trigger enabled ALWAYS, so
  // the subscriber fires it; it sleeps only there). Made on blue, it reaches green with the schema.
  await onLive('postgres', (admin) =>
    admin.query(`CREATE FUNCTION throttle() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF current_setting('session_replication_role') = 'replica' THEN PERFORM pg_sleep(0.05); END IF; RETURN NEW; END $$;
      CREATE TRIGGER throttle BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION throttle();
      ALTER TABLE items ENABLE ALWAYS TRIGGER throttle;`),
  );
  bump('5', '5.0.0');
  writeFileSync(
    w.file,
    readFileSync(w.file, 'utf8')
      .replace('commit: manual', 'commit: auto')
      .replace('timeout: 60s', 'timeout: 6s'),
  );
  const writer = startWriter(url, 200, 'e');
  const id = await migrateDetached(w);
  const ended = await waitFor(w, id, (s) => isFinal(s), 120_000);
  const records = await writer.stop();
  // The runner journals the last event, then writes the lines it brings: the log's last line (the
  // ending) may come a moment after the state says failed (ci42, at load 30).
  let logs = '';
  await eventually(async () => {
    logs = (await runCli(['topology', 'migration', 'logs', id, '-f', w.file])).stdout;
    return /^\S+ {2}failed: /m.test(logs);
  }, 10_000);
  const lagLines = logs
    .split('\n')
    .filter((line) => line.includes('replication lagging: green db trails blue by'));
  const at = (line: string | undefined) => Date.parse(`1970-01-01T${line?.slice(0, 12)}Z`);
  const gateWaited =
    at(logs.split('\n').find((line) => line.includes('health gate failed for db'))) - at(lagLines[0]);
  console.log(
    `postgres: a throttled green: ${lagLines.length} lag line(s), the gate failed ${gateWaited} ms after the first; ${ended.lifecycle}: ${ended.reason}`,
  );
  console.log(lagLines.join('\n'));
  expect(ended.lifecycle, logs).toBe('failed');
  expect(ended.reason).toMatch(
    /^health gate failed for db: replication of db lagging: green trails blue by (\d+(\.\d+)?m?s, )?[1-9]\d* bytes \(at [0-9A-F/]+ of [0-9A-F/]+\), more than replicate\.maxLag 1s, for all of replicate\.timeout 6s/,
  );
  expect(lagLines.length).toBeGreaterThanOrEqual(2); // said while it waits, every 5 s
  expect(gateWaited).toBeGreaterThanOrEqual(5_000); // held for replicate.timeout (6 s) from its first measure
  expect(logs).not.toMatch(/blue db fenced|write hold/); // it never reached the switch
  expect(logs).toMatch(/rolling back: green retired \(no traffic had moved to it\)/);
  expect(logs).toMatch(/db: replication of blue into green stopped and dropped/);
  expect(logs).toMatch(/failed: blue is serving \(health gate failed for db: replication of db lagging/);
  await judge(records, 'postgres: a throttled green', live);
  // Nothing left of the attempt on blue: not fenced, no replication slot, no publication; the router holds nothing.
  const [fenced, slots, publications] = await onLive('app', async (app) => [
    (await app.query('SHOW default_transaction_read_only')).rows[0]?.default_transaction_read_only,
    (await app.query('SELECT count(*)::int AS n FROM pg_replication_slots')).rows[0]?.n,
    (await app.query('SELECT count(*)::int AS n FROM pg_publication')).rows[0]?.n,
  ]);
  expect({ fenced, slots, publications }).toEqual({ fenced: 'off', slots: 0, publications: 0 });
  const snapshot = (await routerClient(w.stateDir).routes()) as unknown as {
    routes: Record<string, { hold?: unknown }>;
  };
  expect(Object.values(snapshot.routes).filter((r) => r.hold !== undefined)).toEqual([]);

  // The throttle released: the same migration completes, nothing lost.
  await onLive('postgres', (admin) =>
    admin.query('DROP TRIGGER throttle ON items; DROP FUNCTION throttle()'),
  );
  const again = startWriter(url, 200, 'f');
  const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  const more = await again.stop();
  expect(result.code, result.stdout + result.stderr).toBe(0);
  await judge(more, 'postgres: the throttle released', '5.0.0');
}, 240_000);
