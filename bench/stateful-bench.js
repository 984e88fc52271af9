/**
 * Stateful bench (issue 28): the switch of a stateful component under the router's write hold, at
 * 50, 200 and 1,000 acknowledged writes/s, against the same migration of the same component
 * stateless (no hold) at the same rates, side by side in the same run.
 *
 * The component is test/fixtures/stateful-kv: a key store whose state is a file (`POST /put?k=K`
 * appends K to $CUTOVER_DATA_DIR/kv.log and fsyncs it before its 200), with the process driver's
 * `replicate: { dataDir: ".", writeHold: 2s }`, behind the real router, its store with group commit
 * (bench/fixtures/kv-group-commit.mjs: still fsync'd before each 200, one fsync for the writes that
 * came during the previous one; the fixture's fsync per write does not carry 1,000/s on a busy
 * machine). The real CLI migrates it
 * 1.0.0 → 2.0.0 (`topology migrate`, local runner), each run in a fresh workspace. A writer in a
 * process of its own (bench/keyed-writer.js) sends uniquely keyed writes through the route from
 * `settleMs` before the migration to `settleMs` after it. Afterwards the store's keys are read
 * through the route (`GET /keys`, served by 2.0.0), and:
 *
 * - missing: acknowledged writes (200) whose key the store does not hold (the baseline's store is
 *   not replicated, so it starts empty: not counted there);
 * - not 2xx: answers other than 2xx and socket errors;
 * - write latency p50/p99/max of the whole run, of the writes sent during the migration (its own
 *   record: started to ended), and of those sent during the hold (the router's `lastHold`: it ended
 *   at `endedAt`, after `durationMs`);
 * - the hold: as the engine logged it (`write_hold_ended`, from the hold's table write to the
 *   release's) and as the router held it (`lastHold`: duration and requests held);
 * - the lag at the switch: the process driver's copy is not continuous, so green trails blue by
 *   every write blue acknowledged after the replicate stage's copy; the final sync under the hold
 *   copies the whole data directory again (its bytes: blue's kv.log at the fence, i.e. every write
 *   1.0.0 acknowledged) and its time is the catch-up's ("green store applied blue's writes … in N
 *   ms").
 *
 * Goals: per rate, 0 acknowledged writes missing and 0 answers not 2xx (strict); the issue's bounds
 * on the writes held, p99 ≤ 1 s and max ≤ 2 s (wall clock: their margin grows with the load); and
 * the judged ratio, taken side by side: write latency p99 during the stateful migration against
 * the stateless one's at the same rate. It is the hold seen by writers: the stateless p99 is the
 * machine's own noise while the CLI migrates, the stateful one adds the writes held.
 *
 * Each rate's pair of runs is about 20 s (start 1.0.0, migrate under writes, `topology down`):
 * about 65 s for the three rates at load 15 on 2 cores; --quick skips 1,000/s, --ratios runs 200/s.
 *
 *   npm run bench -- stateful [--quick]
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { routerClient } from '../dist/router/client.js';
import { startKeyedWriter } from './keyed-writer.js';
import {
  atCleanUp,
  freePort,
  judgeGoal,
  median,
  recordedGoal,
  runNode,
  strictGoal,
  withTempDir,
} from './support.js';

export const name = 'stateful';
export const title =
  'stateful: a file key store (replicate.dataDir) migrated 1.0.0 → 2.0.0 under 50, 200 and 1,000 acknowledged writes/s, against the same store stateless (no hold)';
const ms = (v) => v.toFixed(0);
export const columns = [
  { key: 'run', label: 'run' },
  { key: 'outcome', label: 'outcome' },
  { key: 'load', label: 'load', format: (v) => v.toFixed(1) },
  { key: 'acked', label: 'acked', format: String },
  { key: 'missing', label: 'missing', format: String },
  { key: 'not2xx', label: 'not 2xx', format: String },
  { key: 'beforeP99', label: 'p99 before', format: ms },
  { key: 'p50', label: 'p50', format: ms },
  { key: 'p99', label: 'p99', format: ms },
  { key: 'max', label: 'max', format: ms },
  { key: 'migrationP99', label: 'p99 migr.', format: ms },
  { key: 'engineHoldMs', label: 'hold (engine)', format: ms },
  { key: 'routerHoldMs', label: 'hold (router)', format: ms },
  { key: 'held', label: 'held', format: String },
  { key: 'holdP50', label: 'held p50', format: ms },
  { key: 'holdP99', label: 'held p99', format: ms },
  { key: 'holdMax', label: 'held max', format: ms },
  { key: 'lagWrites', label: 'lag writes', format: String },
  { key: 'syncKiB', label: 'sync KiB', format: (v) => v.toFixed(1) },
  { key: 'catchUpMs', label: 'catch-up', format: ms },
  { key: 'migrationMs', label: 'migration', format: ms },
];

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const cliPath = join(repoRoot, 'bin', 'cutover.js');
const fixture = join(repoRoot, 'test', 'fixtures', 'stateful-kv');
/**
 * The fixture's store with group commit: its one fsync per write caps it near 200 writes/s on a
 * busy machine (at 1,000/s straight to it, no router, load 16: p50 5.3 s, p99 15.7 s; with group
 * commit 17 ms and 168 ms), and the bench measures the switch, not the disk.
 */
const groupCommitStore = join(repoRoot, 'bench', 'fixtures', 'kv-group-commit.mjs');
const rates = [50, 200, 1_000];
/** Writes before the migration starts and after it ends. */
const settleMs = 1_000;
const cliTimeoutMs = 120_000;
/** The issue's bounds on a write held at the switch. */
const heldP99GoalMs = 1_000;
const heldMaxGoalMs = 2_000;
/** Writes slower than this before any migration began: the machine does not carry the rate. */
const saturatedP99Ms = 1_000;
/**
 * The judged ratio: write latency p99 during the stateful migration against the stateless one's at
 * the same rate. Both migrations start a process, health-check it and journal every step; only
 * the switch differs (hold, fence, final sync, release), so the ratio is what the hold adds, as
 * writers see it. At load 15–18 on 2 cores, holds of 44–86 ms against p99s of 19–84 ms gave
 * 1.2–4.3. A hold of 1 s (the issue's p99 bound) over those p99s gives 12–50: it fails beyond 50.
 * The baseline's p99 counts as at least `p99FloorMs`: a quiet machine's p99 of 2–3 ms would make a
 * hold well within its bounds look like a regression.
 */
const p99RatioGoal = 10;
const p99RatioFailBeyond = 50;
const p99FloorMs = 10;

export async function run({ quick, ratios = false, log }) {
  const chosen = ratios ? [200] : quick ? rates.slice(0, 2) : rates;
  const rows = [];
  const pairs = [];
  for (const rate of chosen) {
    // Side by side: the stateful run and its baseline one after the other, at the same rate.
    const stateful = await measure('stateful', rate, log);
    const stateless = await measure('stateless', rate, log);
    rows.push(stateful.row, stateless.row);
    pairs.push({ rate, stateful, stateless });
  }

  const goals = [];
  for (const { rate, stateful, stateless } of pairs) {
    const s = stateful.row;
    const ended = [stateful, stateless].filter((r) => r.outcome !== 'completed');
    goals.push(
      strictGoal({
        label: `${rate} writes/s: migrations that did not complete (stateful, stateless)`,
        value: ended.length,
        target: '= 0',
        pass: ended.length === 0,
        detail:
          ended.length > 0
            ? ended.map((r) => `${r.row.run}: ${r.outcome}: ${r.reason}`).join('; ')
            : undefined,
      }),
    );
    goals.push(
      strictGoal({
        label: `${rate} writes/s: acknowledged writes missing after the stateful migration (of ${s.acked})`,
        value: s.missing,
        target: '= 0',
        pass: s.missing === 0,
        detail: s.missing > 0 ? `e.g. ${stateful.missingKeys.slice(0, 5).join(', ')}` : undefined,
      }),
      strictGoal({
        label: `${rate} writes/s: answers not 2xx during the stateful migration (of ${s.sent} writes)`,
        value: s.not2xx,
        target: '= 0',
        pass: s.not2xx === 0,
        detail: s.not2xx > 0 ? JSON.stringify(stateful.failures) : undefined,
      }),
      judgeGoal({
        label: `${rate} writes/s: write latency p99 during the stateful migration / during the stateless one (${s.migrationWrites} / ${stateless.row.migrationWrites} writes)`,
        value: Number((s.migrationP99 / Math.max(p99FloorMs, stateless.row.migrationP99)).toFixed(2)),
        target: p99RatioGoal,
        failBeyond: p99RatioFailBeyond,
      }),
      // A short hold at 50/s may see no write sent while it lasted: nothing waited, nothing to judge.
      s.holdWrites > 0
        ? judgeGoal({
            label: `${rate} writes/s: p99 of the writes sent during the hold (${s.holdWrites})`,
            value: Number(s.holdP99.toFixed(0)),
            unit: 'ms',
            target: heldP99GoalMs,
            failBeyond: 2 * heldP99GoalMs,
            wallClock: true,
            loadPerCore: s.loadPerCore,
          })
        : {
            label: `${rate} writes/s: p99 of the writes sent during the hold`,
            target: `≤ ${heldP99GoalMs} ms`,
            skipped: `no write was sent during the ${s.routerHoldMs} ms hold`,
          },
      judgeGoal({
        label: `${rate} writes/s: the slowest write of the stateful run`,
        value: Number(s.max.toFixed(0)),
        unit: 'ms',
        target: heldMaxGoalMs,
        failBeyond: 2 * heldMaxGoalMs,
        wallClock: true,
        loadPerCore: s.loadPerCore,
      }),
    );
  }
  if (!ratios)
    goals.push(
      recordedGoal({
        label: 'hold as the router held it, median over the rates',
        value: median(pairs.map((p) => p.stateful.row.routerHoldMs)),
        unit: 'ms',
      }),
    );
  const notes = [
    `each run: a fresh workspace, 1.0.0 started, then writes at the rate from ${settleMs} ms before \`topology migrate\` (2.0.0) to ${settleMs} ms after it; latencies in ms of acknowledged writes; "p99 migr." over the writes sent while the migration ran (its record's start to end); "held …" over the writes sent while the router held (its lastHold)`,
    "hold (engine): the `write_hold_ended` notice, from the hold's table write to the release's; hold (router): from the router applying the hold to the release, as `/routes` lastHold and cutover_route_write_hold_seconds have it",
    'lag writes: writes 1.0.0 acknowledged after the replicate stage\'s copy, which green did not have when the hold began; sync KiB: what the final sync copied (the whole kv.log: the copy is not incremental); catch-up: that copy and the digest check, from the log ("applied … in N ms")',
    'stateless: the same store without `stateful`/`replicate` (no hold, nothing copied): its store starts empty at 2.0.0, so missing is not counted',
    ...pairs
      .flatMap((p) => [p.stateful, p.stateless])
      .filter((r) => r.row.beforeP99 > saturatedP99Ms)
      .map(
        (r) =>
          `${r.row.run}: the machine did not carry the rate before the migration began (p99 before ${r.row.beforeP99.toFixed(0)} ms, the writer itself late by ${r.lateP99.toFixed(0)} ms p99, load ${r.row.load.toFixed(1)}): its figures are of a saturated machine, not of the switch`,
      ),
    `writer lateness (its own stalls, p99 per run): ${pairs.flatMap((p) => [p.stateful, p.stateless].map((r) => `${r.row.run} ${r.lateP99.toFixed(0)} ms`)).join(', ')}`,
  ];
  return { rows, goals, notes };
}

/** One migration 1.0.0 → 2.0.0 under writes at `rate`, in a workspace of its own. */
async function measure(kind, rate, log) {
  return withTempDir(`stateful-${kind}-${rate}`, async (dir) => {
    cpSync(fixture, dir, { recursive: true });
    cpSync(groupCommitStore, join(dir, 'kv.mjs'));
    const file = join(dir, 'topology.yaml');
    const port = await freePort();
    let text = readFileSync(file, 'utf8').replace(/127\.0\.0\.1:\d+/, `127.0.0.1:${port}`);
    if (kind === 'stateless') text = text.replace(/^ {4}(stateful|replicate):.*\n/gm, '');
    writeFileSync(file, text);
    const url = `http://127.0.0.1:${port}/`;
    const stateDir = join(dir, '.cutover');
    const cli = async (args) => {
      const r = await runNode([cliPath, ...args, '-f', file], { cwd: dir, timeoutMs: cliTimeoutMs });
      if (r.code !== 0)
        throw new Error(`cutover ${args.join(' ')} exited ${r.code ?? r.signal}:\n${r.stderr.slice(-2000)}`);
      return r;
    };
    // Whatever happens (an error, ^C), the router and the store's processes go away.
    const processes = processesOf(stateDir);
    let writer = null;
    const down = () => {
      writer?.kill();
      processes.down(dir, file);
    };
    const unregister = atCleanUp(down);
    // The records are read while the CLI runs too: it may be interrupted before it returns.
    const remembering = setInterval(processes.remember, 250).unref();
    try {
      log(`${rate} writes/s, ${kind}: 1.0.0 goes live`);
      await cli(['topology', 'migrate', '--yes']);
      writeFileSync(file, text.replace('version: "1.0.0"', 'version: "2.0.0"'));
      log(`${rate} writes/s, ${kind}: 1.0.0 → 2.0.0 under writes`);
      writer = startKeyedWriter({ url, rate, prefix: `${kind[0]}${rate}` });
      await sleep(settleMs);
      const loadBefore = loadavg()[0];
      // A migration that fails (rolled back) is a figure too: what the writers saw, and what blue kept.
      const migrated = await runNode([cliPath, 'topology', 'migrate', '--yes', '--json', '-f', file], {
        cwd: dir,
        timeoutMs: cliTimeoutMs,
      });
      const loadAfter = loadavg()[0];
      await sleep(settleMs);
      const records = await writer.stop();
      let summary;
      try {
        ({ summary } = JSON.parse(migrated.stdout));
      } catch {
        throw new Error(
          `cutover topology migrate exited ${migrated.code ?? migrated.signal}:\n${migrated.stdout.slice(-2000)}${migrated.stderr.slice(-2000)}`,
        );
      }
      const stored = await storedKeys(url);
      const serving = summary.lifecycle === 'completed' ? '2.0.0' : '1.0.0';
      if (stored.version !== serving)
        throw new Error(
          `migration ${summary.lifecycle}, and the route is served by ${stored.version}, not ${serving}`,
        );
      const lastHold = (await routerClient(stateDir).routes()).routes['kv/www']?.lastHold ?? null;
      const logLines = readFileSync(
        join(stateDir, 'environments', 'kv', 'migrations', summary.id, 'log.ndjson'),
        'utf8',
      )
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line));
      return judgeRun({ kind, rate, records, stored, summary, lastHold, logLines, loadBefore, loadAfter });
    } finally {
      clearInterval(remembering);
      unregister();
      down();
    }
  });
}

function judgeRun({ kind, rate, records, stored, summary, lastHold, logLines, loadBefore, loadAfter }) {
  const stateful = kind === 'stateful';
  const acked = records.filter((r) => r.status === 200 && !r.error);
  const failed = records.filter((r) => r.error || r.status < 200 || r.status >= 300);
  const missingKeys = stateful ? acked.filter((r) => !stored.keys.has(r.key)).map((r) => r.key) : [];
  const started = Date.parse(summary.startedAt);
  const ended = Date.parse(summary.endedAt);
  const during = (from, to) => acked.filter((r) => r.sentAt >= from && r.sentAt < to).map((r) => r.ms);
  const all = latencies(acked.map((r) => r.ms));
  const before = latencies(during(0, started));
  const migration = latencies(during(started, ended));
  // The router's hold: it ended at endedAt, after durationMs (its own clock).
  const hold =
    stateful && lastHold ? latencies(during(lastHold.endedAt - lastHold.durationMs, lastHold.endedAt)) : null;
  if (stateful && !lastHold) throw new Error('the router reports no hold after the stateful migration');
  const engineHold = logLines.find((l) => l.kind === 'write_hold_ended');
  const catchUp = logLines.find((l) => /applied blue's writes up to \S+ in \d+ ms/.test(l.message));
  // The replicate stage's copy: the first "copied …" of the migration (the final sync is the second).
  const firstCopy = logLines.find((l) => l.kind === 'driver' && l.message.startsWith('copied '));
  const byBlue = acked.filter((r) => r.version === '1.0.0');
  const loadPerCore = Math.max(1, Math.max(loadBefore, loadAfter) / 2);
  const lateness = records.map((r) => r.lateMs).sort((a, b) => a - b);
  return {
    missingKeys,
    failures: summarizeFailures(failed),
    lateP99: lateness[Math.floor(0.99 * (lateness.length - 1))] ?? 0,
    outcome: summary.lifecycle,
    reason: summary.reason,
    row: {
      run: `${rate}/s ${kind}`,
      outcome: summary.lifecycle,
      load: Math.max(loadBefore, loadAfter),
      loadPerCore,
      sent: records.length,
      acked: acked.length,
      missing: stateful ? missingKeys.length : null,
      not2xx: failed.length,
      beforeP99: before.p99,
      p50: all.p50,
      p99: all.p99,
      max: all.max,
      migrationWrites: migration.count,
      migrationP99: migration.p99,
      engineHoldMs: engineHold ? Number(/after (\d+) ms/.exec(engineHold.message)?.[1]) : null,
      routerHoldMs: lastHold?.durationMs ?? null,
      held: lastHold?.heldCount ?? null,
      holdWrites: hold?.count ?? null,
      holdP50: hold?.p50 ?? null,
      holdP99: hold?.p99 ?? null,
      holdMax: hold?.max ?? null,
      lagWrites: stateful && firstCopy ? byBlue.filter((r) => r.sentAt + r.ms > firstCopy.at).length : null,
      syncKiB: stateful ? byBlue.reduce((sum, r) => sum + r.key.length + 1, 0) / 1024 : null,
      catchUpMs: catchUp ? Number(/in (\d+) ms/.exec(catchUp.message)?.[1]) : null,
      migrationMs: ended - started,
    },
  };
}

function latencies(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p) =>
    sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
  return { count: sorted.length, p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? Number.NaN };
}

function summarizeFailures(failed) {
  const by = {};
  for (const r of failed) {
    const what = r.error ?? String(r.status);
    by[what] = (by[what] ?? 0) + 1;
  }
  return by;
}

/** The keys the store holds, through the route (`GET /keys`), and the version that answered. */
async function storedKeys(url) {
  const res = await fetch(new URL('/keys', url));
  const body = await res.json();
  return { version: body.version, keys: new Set(body.keys) };
}

/**
 * The processes the CLI started for a workspace (the router and the store's replicas, which outlive
 * it), as their records in the state directory name them, remembered after each command: when the
 * run is interrupted, run.js removes the workspace before this process exits, records and all.
 */
function processesOf(stateDir) {
  const owned = new Map();
  const remember = () => {
    const slots = join(stateDir, 'environments', 'kv', 'slots');
    const records = [join(stateDir, 'router', 'router.json')];
    for (const slot of existsSync(slots) ? readdirSync(slots) : [])
      records.push(join(slots, slot, 'slot.json'));
    for (const file of records) {
      try {
        const record = JSON.parse(readFileSync(file, 'utf8'));
        for (const { pid, startTime } of record.replicas ?? [record]) owned.set(pid, String(startTime));
      } catch {
        // no record, or one being written
      }
    }
  };
  /** `topology down`; failing that, each remembered process still running as itself is killed. */
  const down = (dir, file) => {
    remember();
    if (existsSync(file)) {
      const r = spawnSync(process.execPath, [cliPath, 'topology', 'down', '--yes', '-f', file], {
        cwd: dir,
        timeout: 60_000,
      });
      if (r.status === 0) return;
    }
    for (const [pid, startTime] of owned) {
      try {
        // A pid reused since is someone else's: only the process started at the recorded time.
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        if (stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[19] === startTime) process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  return { remember, down };
}
