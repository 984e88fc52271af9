/**
 * Issue 28 in Temporal mode: the switch of a stateful component under the router's write hold runs
 * in the migration workflow, each of its steps (hold, fence, catch-up, promote, reverse) an
 * activity, and loses no acknowledged write: on a migration, on a rollback from awaiting_commit
 * (after the switch), on the migration after it; and when the worker running the switch is
 * SIGKILLed and another takes over. The key store of test/fixtures/stateful-kv (its state is a
 * file: the process driver's `replicate.dataDir`), the real router, the real CLI, a real
 * `cutover worker` on the run's dev server; a writer sends uniquely keyed writes at 200/s all along.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MigrationState } from '../../core/migration/types.js';
import type { TemporalMigrations } from '../../engine/temporal/temporal-migrations.js';
import { routerClient } from '../../router/client.js';
import type { RouteSnapshot } from '../../router/control-types.js';
import { repoRoot, runCli } from '../support/cli.js';
import {
  copyFixture,
  freePort,
  killRunners,
  killSlots,
  setVersion,
  type Workspace,
} from '../support/migrations.js';
import { percentile, startWriter, storedKeys, type WriteRecord } from '../support/writer.js';
import {
  connectClient,
  isFinalState,
  killWorkers,
  logText,
  migrateDetached,
  sharedTemporal,
  startWorkerProcess,
  type TemporalTarget,
  temporalEnv,
  uniqueName,
  waitForState,
} from './robustness-helpers.js';

interface Space {
  t: TemporalTarget;
  w: Workspace;
  url: string;
  environment: string;
  client: TemporalMigrations;
  cli(args: string[]): ReturnType<typeof runCli>;
}

/**
 * A copy of the key store's fixture in an environment and on a task queue of its own, in memory
 * (/dev/shm where there is one): the store fsyncs every write, and the shared test machine's disk
 * under load takes 4–9 ms a fsync, which is all of a replica's time at 200 writes/s (green then
 * misses its health checks behind its queue, whatever the engine does). What is judged here is
 * the engine's; the local test (test/cutover/stateful-switch.test.ts) runs the store on disc.
 */
async function space(prefix: string): Promise<Space> {
  const t = { address: sharedTemporal(), taskQueue: uniqueName(prefix) };
  const environment = uniqueName(prefix);
  const dir = await mkdtemp(path.join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'cutover-kv-'));
  copyFixture(path.join(repoRoot, 'test', 'fixtures', 'stateful-kv'), dir);
  const file = path.join(dir, 'topology.yaml');
  const port = await freePort();
  writeFileSync(
    file,
    readFileSync(file, 'utf8')
      .replace('name: kv', `name: ${environment}`)
      .replace(/127\.0\.0\.1:18\d\d\d/, `127.0.0.1:${port}`),
  );
  // A replica answers its health check 503 while its slot directory holds a file `sick`.
  const app = path.join(dir, 'kv.mjs');
  const source = readFileSync(app, 'utf8');
  const healthz = "if (url.pathname === '/healthz') return res.end('ok');";
  if (!source.includes(healthz)) throw new Error(`${app} changed: no ${healthz}`);
  writeFileSync(
    app,
    source
      .replace('import { closeSync,', 'import { closeSync, existsSync,')
      .replace(
        healthz,
        "if (url.pathname === '/healthz') {\n      if (existsSync(path.join(process.env.CUTOVER_DATA_DIR ?? '.', '..', 'sick'))) res.statusCode = 503;\n      return res.end('ok');\n    }",
      ),
  );
  const stateDir = path.join(dir, '.cutover');
  const w: Workspace = { dir, file, stateDir, cleanup: () => rm(dir, { recursive: true, force: true }) };
  const client = await connectClient(t);
  const cli = (args: string[]) => runCli([...args, '-f', w.file], { env: temporalEnv(t) });
  return { t, w, url: `http://127.0.0.1:${port}/`, environment, client, cli };
}

/** Down (through a live worker), then every process the space left, by pid, and its files. */
async function teardown(s: Space | undefined): Promise<void> {
  if (!s) return;
  await s.cli(['topology', 'down', '--yes']).catch(() => undefined);
  await killWorkers();
  killSlots(s.w.stateDir);
  killRunners(s.w.stateDir);
  await s.client.close().catch(() => undefined);
  await s.w.cleanup();
}

/** The route of the space, as its router has it now. */
async function route(s: Space): Promise<RouteSnapshot | undefined> {
  return (await routerClient(s.w.stateDir).routes()).routes[`${s.environment}/www`];
}

/** Every acknowledged write is on the serving side, and no write met a 5xx or a broken socket. */
async function judge(
  s: Space,
  id: string,
  records: WriteRecord[],
  label: string,
  version: string,
): Promise<void> {
  const acked = records.filter((r) => r.status === 200);
  const stored = await storedKeys(s.url);
  expect(stored.version).toBe(version);
  const missing = acked.filter((r) => !stored.keys.has(r.key));
  const failed = records.filter((r) => r.status !== 200);
  const ms = acked.map((r) => r.ms);
  const holds = [...(await logText(s.t, id)).matchAll(/write hold ended after (\d+) ms/g)].map((m) => m[1]);
  console.log(
    `Temporal, ${label}: ${acked.length} acknowledged, ${missing.length} missing, ${failed.length} not acknowledged (${[...new Set(failed.map((r) => r.status))].join(', ')}); write latency p99 ${percentile(ms, 99)} ms, max ${Math.max(...ms)} ms; write holds ${holds.join(', ')} ms`,
  );
  expect(missing.map((r) => r.key)).toEqual([]);
  expect(failed.filter((r) => r.status >= 500 || r.status === 0)).toEqual([]);
  expect(acked.length).toBeGreaterThan(100);
  // The write hold (issue 28's bounds): p99 of what writes waited ≤ 1 s, nothing past the budget (2 s).
  expect(percentile(ms, 99)).toBeLessThanOrEqual(1_000);
  expect(Math.max(...ms)).toBeLessThanOrEqual(2_000);
  // The router holds nothing once the migration has ended.
  expect((await route(s))?.hold).toBeUndefined();
}

const awaitingOrFinal = (st: MigrationState) => st.lifecycle === 'awaiting_commit' || isFinalState(st);

describe('Temporal mode: the switch of a stateful component loses no acknowledged write', () => {
  let s: Space | undefined;

  beforeAll(async () => {
    s = await space('kv');
    await startWorkerProcess(s.t, s.w.stateDir);
    const first = await s.cli(['topology', 'migrate', '--yes']);
    expect(first.code, first.stdout + first.stderr).toBe(0);
  }, 60_000);

  afterAll(() => teardown(s), 60_000);

  it('migrate: every acknowledged write reaches green', async () => {
    const sp = s as Space;
    setVersion(sp.w, 'store', '2.0.0');
    const writer = startWriter(sp.url, 200, 'a');
    const id = await migrateDetached(sp.t, sp.w.file);
    const ended = await waitForState(sp.client, id, isFinalState, 60_000);
    const records = await writer.stop();
    const log = await logText(sp.t, id);
    console.log(log);
    expect(ended.lifecycle, log).toBe('completed');
    // Each step of the switch ran as an activity of the workflow, in order.
    expect(log).toMatch(
      /write hold on www: nothing in flight to blue[\s\S]*blue store fenced at position[\s\S]*green store applied blue's writes up to[\s\S]*green store promoted/,
    );
    expect(log).toMatch(/write hold ended after \d+ ms: the held requests went to green/);
    await judge(sp, id, records, 'migrate 1.0.0 → 2.0.0', '2.0.0');
  }, 90_000);

  it('a rollback from awaiting_commit, after the switch: every write green took reaches blue', async () => {
    const sp = s as Space;
    setVersion(sp.w, 'store', '3.0.0');
    writeFileSync(sp.w.file, readFileSync(sp.w.file, 'utf8').replace('commit: auto', 'commit: manual'));
    const writer = startWriter(sp.url, 200, 'b');
    const id = await migrateDetached(sp.t, sp.w.file);
    expect((await waitForState(sp.client, id, awaitingOrFinal, 60_000)).lifecycle).toBe('awaiting_commit');
    // Green serves, and takes writes, for a while before the rollback.
    await sleep(1_000);
    const rollback = await sp.cli(['topology', 'migration', 'rollback', id]);
    expect(rollback.code, rollback.stdout + rollback.stderr).toBe(0);
    const ended = await waitForState(sp.client, id, isFinalState, 60_000);
    const records = await writer.stop();
    expect(ended.lifecycle).toBe('rolled_back');
    expect(await logText(sp.t, id)).toMatch(/blue store applied green's writes up to/);
    await judge(sp, id, records, 'rollback of 3.0.0 from awaiting_commit', '2.0.0');
  }, 120_000);

  it('the migration after a rollback, committed: nothing lost', async () => {
    const sp = s as Space;
    const writer = startWriter(sp.url, 200, 'c');
    const id = await migrateDetached(sp.t, sp.w.file);
    expect((await waitForState(sp.client, id, awaitingOrFinal, 60_000)).lifecycle).toBe('awaiting_commit');
    const commit = await sp.cli(['topology', 'migration', 'commit', id]);
    expect(commit.code, commit.stdout + commit.stderr).toBe(0);
    const ended = await waitForState(sp.client, id, isFinalState, 60_000);
    const records = await writer.stop();
    expect(ended.lifecycle).toBe('completed');
    await judge(sp, id, records, 'migrate to 3.0.0, committed', '3.0.0');
  }, 120_000);
});

const preload = path.join(repoRoot, 'test', 'fixtures', 'preload', 'inject-fault.mjs');

interface FaultedWorker {
  /** What the preload says it did: empty until the fault fires. */
  fired(): string;
  exited: Promise<void>;
  kill(): Promise<void>;
}

/** The kills of the faulted workers a test started (after each test, by pid). */
const faulted = new Set<() => Promise<void>>();

/**
 * `cutover worker` with test/fixtures/preload/inject-fault.mjs: SIGKILLed right after its `nth`
 * file-system call `op` on a file matching `path` (a point of the switch, the same on every run).
 */
async function faultedWorker(
  t: TemporalTarget,
  stateDir: string,
  fault: { op: string; path: string; nth: number },
): Promise<FaultedWorker> {
  const firedFile = path.join(stateDir, '..', `fired-${Date.now()}`);
  const child = spawn(
    process.execPath,
    ['--import', preload, path.join(repoRoot, 'bin', 'cutover.js'), 'worker', '--state-dir', stateDir],
    {
      env: {
        ...process.env,
        ...temporalEnv(t),
        NO_COLOR: '1',
        CUTOVER_TEST_FAULT: JSON.stringify({ ...fault, fault: 'SIGKILL' }),
        CUTOVER_TEST_FAULT_FIRED: firedFile,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let err = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  faulted.add(kill);
  const deadline = Date.now() + 20_000;
  while (!err.includes('cutover worker on')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await kill();
      throw new Error(`cutover worker did not start: ${err}`);
    }
    await sleep(50);
  }
  return { fired: () => (existsSync(firedFile) ? readFileSync(firedFile, 'utf8') : ''), exited, kill };
}

describe('Temporal mode: the worker running the switch is SIGKILLed', () => {
  let s: Space | undefined;
  afterEach(async () => {
    for (const kill of faulted) await kill();
    faulted.clear();
    await teardown(s);
    s = undefined;
  }, 60_000);

  /**
   * Where the worker dies: each a file-system call of the worker (the preload's count), so the
   * point is the same on every run. The hold's table and the release's are the worker's writes of
   * the router's table (the router applies a table when the file changes: it went live); green's
   * catch-up is the copy of blue's data directory into green's (the first copy is the replicate
   * stage's). The next worker comes at once, or only after the router's own bound for a dead
   * engine's hold has passed (the held requests then went on by the table live: to blue).
   */
  const holdTable = { op: 'rename', path: 'router/routes\\.json$', nth: 1 };
  const catchUpCopy = { op: 'cp', path: 'slots/store-[^/]+/data$', nth: 2 };
  const releaseTable = { op: 'rename', path: 'router/routes\\.json$', nth: 2 };
  interface KillCase {
    name: string;
    fault: typeof holdTable;
    /** The command the next worker runs again. */
    rerun: string;
    /** Whether the next worker starts only once the router holds nothing. */
    late: boolean;
    /** The router's hold when the next worker starts: still held, ended by its bound, released. */
    router: 'holding' | 'expired' | 'released';
    greenSick?: boolean;
  }
  const cases: KillCase[] = [
    {
      name: 'once the router holds, before the fence; the next worker at once',
      fault: holdTable,
      rerun: 'hold_routes',
      late: false,
      router: 'holding',
    },
    {
      name: 'once the router holds, before the fence; the next worker after the hold expired',
      fault: holdTable,
      rerun: 'hold_routes',
      late: true,
      router: 'expired',
    },
    {
      name: 'once green caught up, before promote; the next worker at once',
      fault: catchUpCopy,
      rerun: 'catch_up',
      late: false,
      router: 'holding',
    },
    {
      name: 'once green caught up, before promote; the next worker after the hold expired',
      fault: catchUpCopy,
      rerun: 'catch_up',
      late: true,
      router: 'expired',
    },
    {
      name: 'once the release went live, before it was recorded',
      fault: releaseTable,
      rerun: 'shift_routes',
      late: true,
      router: 'released',
    },
    // Green took writes from the release on, then fails its health: the next worker's call of the
    // release must not be refused as if green had taken nothing, and the rollback brings what
    // green took back to blue.
    {
      name: 'once the release went live, before it was recorded, and green fails its health meanwhile',
      fault: releaseTable,
      rerun: 'shift_routes',
      late: true,
      router: 'released',
      greenSick: true,
    },
  ];

  for (const c of cases) {
    it(`killed ${c.name}: the migration ends, nothing lost, nothing held`, async () => {
      s = await space('kvkill');
      const sp = s;
      const first = await startWorkerProcess(sp.t, sp.w.stateDir);
      const initial = await sp.cli(['topology', 'migrate', '--yes']);
      expect(initial.code, initial.stdout + initial.stderr).toBe(0);
      await first.kill('SIGTERM');

      const doomed = await faultedWorker(sp.t, sp.w.stateDir, c.fault);
      setVersion(sp.w, 'store', '2.0.0');
      const writer = startWriter(sp.url, 200, 'k');
      const id = await migrateDetached(sp.t, sp.w.file);
      const died = await Promise.race([doomed.exited.then(() => true), sleep(60_000).then(() => false)]);
      expect(died, 'the worker was never killed: the point was not reached').toBe(true);
      expect(doomed.fired()).toMatch(/^SIGKILL /);
      if (c.greenSick) writeFileSync(path.join(slotDir(sp, id), 'sick'), '');
      if (c.late) {
        // Until a hold has ended (the router may apply the table it died after a moment later).
        const ended = async () => {
          const r = await route(sp);
          return !r?.hold && r?.lastHold !== undefined;
        };
        const deadline = Date.now() + 20_000;
        while (!(await ended()) && Date.now() < deadline) await sleep(50);
      }
      const atRestart = await route(sp);
      await startWorkerProcess(sp.t, sp.w.stateDir);
      const ended = await waitForState(sp.client, id, isFinalState, 90_000);
      const records = await writer.stop();
      const log = await logText(sp.t, id);
      const hold = atRestart?.hold
        ? `holding (${JSON.stringify(atRestart.hold)})`
        : JSON.stringify(atRestart?.lastHold);
      const acked = records.filter((r) => r.status === 200);
      const stored = await storedKeys(sp.url);
      const missing = acked.filter((r) => !stored.keys.has(r.key));
      const refused = records.filter((r) => r.status === 503);
      const broken = records.filter((r) => r.status !== 200 && r.status !== 503);
      console.log(
        `Temporal, worker killed ${c.name}: ${ended.lifecycle}; ${acked.length} acknowledged, ${missing.length} missing, ${refused.length} answered 503 (the hold full), ${broken.length} other failures; write latency max ${Math.max(...acked.map((r) => r.ms))} ms; the router's hold when the next worker started: ${hold}`,
      );
      // Completed, or undone with blue serving (failed: the switch could not finish in its budget).
      expect(['completed', 'rolled_back', 'failed'], log).toContain(ended.lifecycle);
      expect(stored.version, log).toBe(ended.lifecycle === 'completed' ? '2.0.0' : '1.0.0');
      expect(
        missing.map((r) => r.key),
        log,
      ).toEqual([]);
      expect(broken, log).toEqual([]);
      expect((await route(sp))?.hold).toBeUndefined();
      // The second worker took the killed one's call over.
      expect(log).toContain(`${c.rerun} is run again (attempt 2): the worker that ran it stopped answering`);
      expect(atRestart?.hold ? 'holding' : atRestart?.lastHold?.ended).toBe(c.router);
      // Green took writes before it failed: the rollback switched back, blue caught up with green.
      if (c.greenSick) expect(log).toMatch(/blue store applied green's writes up to/);
    }, 180_000);
  }
});

/** The slot directory of `migrationId`'s green store. */
function slotDir(s: Space, migrationId: string): string {
  return path.join(s.w.stateDir, 'environments', s.environment, 'slots', `store-${migrationId}`);
}
