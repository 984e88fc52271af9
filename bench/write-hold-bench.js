/**
 * Write-hold bench (issue 28): what a hold/release cycle of the router costs the requests it held,
 * with 10, 100 and 1,000 of them, against the same number of requests sent at once without a hold.
 *
 * One router (`cutover proxy`, its own process), two upstreams in this process that note when each
 * request reaches them (performance.now(), the clock the release is timed with). The route changes
 * through the engine's own router driver, as a switch makes them: `apply` with a hold at 0 % green,
 * then `apply` at 100 % green without it (the release). Each round, for N requests on N open
 * keep-alive connections:
 *
 * - burst: the N requests sent at once without a hold: from the first sent to the last one reaching
 *   the upstream (the router parses, picks and forwards N requests);
 * - hold: `apply` with the hold (until the call returns: the hold is in effect), then the N requests,
 *   until the router reports N held;
 * - release: from the start of the release's `apply` (the table write) to its return, and to the
 *   last held request reaching green: the added latency of the release, which is what the router
 *   adds to a held request beyond the hold the engine chose.
 *
 * The router's CPU time (from /proc) is read around the burst (first sent to last answered) and
 * around the cycle (the hold's apply to the last held request answered, the release included).
 *
 * The goals are ratios of two figures taken side by side, at 1,000 requests (release time against
 * burst time; the cycle's router CPU against the burst's), which hold on a busy machine as on a
 * quiet one; the absolute release time is judged with the wall-clock margin (support.js). A first
 * round warms up and is not counted.
 *
 *   npm run bench -- write-hold [--quick]
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createRouterDriver, createRouteTableDriver } from '../dist/engine/drivers/router-driver.js';
import { StateDir } from '../dist/engine/store/state-dir.js';
import { routerClient } from '../dist/router/client.js';
import { ownedProcesses, waitAnswers } from './router-support.js';
import { freePort, judgeGoal, median, recordedGoal, strictGoal, withTempDir } from './support.js';

export const name = 'write-hold';
export const title =
  'write-hold: the latency a hold/release cycle adds, with 10, 100 and 1,000 held requests';
export const columns = [
  { key: 'held', label: 'held', format: String },
  { key: 'burstMs', label: 'burst → last at upstream ms', format: (v) => v.toFixed(1) },
  { key: 'holdApplyMs', label: 'hold apply ms', format: (v) => v.toFixed(1) },
  { key: 'releaseApplyMs', label: 'release apply ms', format: (v) => v.toFixed(1) },
  { key: 'releaseMs', label: 'release → last at green ms', format: (v) => v.toFixed(1) },
  { key: 'ratio', label: 'release / burst', format: (v) => v.toFixed(2) },
  { key: 'burstCpuMs', label: 'router CPU ms: burst', format: (v) => v.toFixed(0) },
  { key: 'cycleCpuMs', label: 'router CPU ms: hold + release', format: (v) => v.toFixed(0) },
  { key: 'failed', label: 'failed', format: String },
];

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const cliPath = join(repoRoot, 'bin', 'cutover.js');
const sizes = [10, 100, 1_000];
const fullRounds = 7;
const quickRounds = 3;
/** Releasing 1,000 held requests may take at most this many times a burst of 1,000 without a hold. */
const releaseRatioGoal = 1.5;
/** A release slower than this many bursts is a regression (a walk of the queue per request, say). */
const releaseRatioFailBeyond = 3;
/** From the release's table write to the last of 1,000 held requests at green. */
const release1000GoalMs = 150;
const release1000FailBeyondMs = 300;
const heldTimeoutMs = 30_000;
const heldPollMs = 20;
/** Linux counts process CPU time in clock ticks of 10 ms (USER_HZ = 100). */
const msPerTick = 10;
/** The router's CPU for a hold/release cycle of 1,000 requests against a burst of 1,000. */
const cpuRatioGoal = 1.5;
const cpuRatioFailBeyond = 3;
/** The engine's bound on the bench's holds: far beyond a round, so no hold expires in the bench. */
const holdBoundMs = 60_000;

export async function run({ quick, ratios = false, log }) {
  const rounds = quick || ratios ? quickRounds : fullRounds;
  return withTempDir('write-hold', async (dir) => {
    const owned = ownedProcesses();
    const upstreams = await Promise.all([recordingUpstream(), recordingUpstream()]);
    try {
      return await measure(dir, owned, upstreams, rounds, ratios, log);
    } finally {
      await owned.stopAll();
      for (const upstream of upstreams) await upstream.close();
    }
  });
}

async function measure(dir, owned, [blue, green], rounds, ratios, log) {
  const stateDir = StateDir.at(join(dir, 'state'));
  const ctx = { environment: 'bench', migrationId: 'bench', stateDir, baseDir: dir };
  const listen = `127.0.0.1:${await freePort()}`;
  const state = (greenPercent, hold) => ({
    route: 'app',
    spec: { listen, to: 'db', shift: [100], drain: { timeout: 10_000 } },
    blue: { component: 'db', slot: 'blue', version: '1', addresses: [blue.address] },
    green: { component: 'db', slot: 'green', version: '2', addresses: [green.address] },
    greenPercent,
    ...(hold ? { hold } : {}),
  });
  const options = { signal: new AbortController().signal, log: () => {} };
  await createRouteTableDriver().apply(ctx, state(0), options);
  const routerProcess = owned.start(process.execPath, [cliPath, 'proxy', '--state-dir', stateDir.root]);
  const routerCpuMs = () => cpuMs(routerProcess.pid);
  await waitAnswers(listen);
  const driver = createRouterDriver();
  const client = routerClient(stateDir.root);
  const routeKey = 'bench/app';

  const rows = [];
  const perSize = new Map();
  for (const size of ratios ? [1_000] : sizes) {
    const agent = new Agent({ keepAlive: true, maxSockets: size });
    const runs = [];
    let failed = 0;
    // Round 0 opens the connections and warms the router up: not counted.
    for (let round = 0; round <= rounds; round++) {
      log(`${size} held, round ${round}/${rounds}${round === 0 ? ' (warm-up)' : ''}`);
      // A burst without a hold, to blue.
      const burstTag = `/burst/${size}/${round}/`;
      const burstCpu = routerCpuMs();
      const burstStart = performance.now();
      const burst = sendAll(listen, agent, burstTag, size);
      const burstLast = await blue.lastOf(burstTag, size);
      failed += countFailed(await burst);
      const burstCpuMs = routerCpuMs() - burstCpu;

      // The hold, in effect when apply returns, then N requests held.
      const hold = {
        id: `bench-${size}-${round}`,
        since: Date.now(),
        expiresAt: Date.now() + holdBoundMs,
        maxHeld: size,
      };
      const cycleCpu = routerCpuMs();
      const holdStart = performance.now();
      await driver.apply(ctx, state(0, hold), options);
      const holdApplied = performance.now();
      const heldTag = `/held/${size}/${round}/`;
      const held = sendAll(listen, agent, heldTag, size);
      const deadline = Date.now() + heldTimeoutMs;
      // Not too often: each look costs the router CPU the cycle is charged with.
      while ((await client.routes()).routes[routeKey]?.hold?.held !== size) {
        if (Date.now() > deadline)
          throw new Error(`the router did not hold ${size} requests in ${heldTimeoutMs} ms`);
        await sleep(heldPollMs);
      }

      // The release: the table write, the reload, and the held requests on their way to green.
      const releaseStart = performance.now();
      await driver.apply(ctx, state(100), options);
      const releaseApplied = performance.now();
      const releaseLast = await green.lastOf(heldTag, size);
      failed += countFailed(await held);
      const cycleCpuMs = routerCpuMs() - cycleCpu;
      if (blue.count(heldTag) > 0) throw new Error(`${blue.count(heldTag)} held requests reached blue`);
      await driver.apply(ctx, state(0), options);
      if (round === 0) continue;
      runs.push({
        burstMs: burstLast - burstStart,
        holdApplyMs: holdApplied - holdStart,
        releaseApplyMs: releaseApplied - releaseStart,
        releaseMs: releaseLast - releaseStart,
        ratio: (releaseLast - releaseStart) / (burstLast - burstStart),
        burstCpuMs,
        cycleCpuMs,
      });
    }
    agent.destroy();
    const med = (key) => median(runs.map((r) => r[key]));
    const row = {
      held: size,
      burstMs: med('burstMs'),
      holdApplyMs: med('holdApplyMs'),
      releaseApplyMs: med('releaseApplyMs'),
      releaseMs: med('releaseMs'),
      ratio: med('ratio'),
      burstCpuMs: med('burstCpuMs'),
      cycleCpuMs: med('cycleCpuMs'),
      failed,
    };
    rows.push(row);
    perSize.set(size, row);
  }

  const at1000 = perSize.get(1_000);
  const goals = [
    judgeGoal({
      label:
        'releasing 1,000 held requests against a burst of 1,000 without a hold (median of per-round ratios)',
      value: Number(at1000.ratio.toFixed(2)),
      target: releaseRatioGoal,
      failBeyond: releaseRatioFailBeyond,
    }),
    judgeGoal({
      label:
        'router CPU for 1,000 requests held and released against 1,000 sent without a hold (medians over rounds)',
      value: Number((at1000.cycleCpuMs / Math.max(msPerTick, at1000.burstCpuMs)).toFixed(2)),
      target: cpuRatioGoal,
      failBeyond: cpuRatioFailBeyond,
    }),
    strictGoal({
      label: 'failed requests (held or not)',
      value: rows.reduce((sum, r) => sum + r.failed, 0),
      target: '= 0',
      pass: rows.every((r) => r.failed === 0),
    }),
  ];
  if (!ratios) {
    goals.push(
      judgeGoal({
        label: 'release of 1,000 held requests: table write to the last at green',
        value: Number(at1000.releaseMs.toFixed(1)),
        unit: 'ms',
        target: release1000GoalMs,
        failBeyond: release1000FailBeyondMs,
        wallClock: true,
      }),
      ...[10, 100].map((size) =>
        recordedGoal({
          label: `release of ${size} held requests: table write to the last at green`,
          value: Number(perSize.get(size).releaseMs.toFixed(1)),
          unit: 'ms',
        }),
      ),
    );
  }
  const notes = [
    `${rounds} rounds per size after a warm-up round, medians; each of the N requests on its own open keep-alive connection`,
    "a release is one routing-table write (fsync, rename) and one POST /reload, through the engine's router driver",
  ];
  return { rows, goals, notes };
}

/** The CPU time (user + system) a process used so far, in ms (10 ms steps). */
function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * msPerTick;
}

/** Sends `count` GETs at once, `<tag><i>`; resolves with their statuses (0: a socket error). */
function sendAll(listen, agent, tag, count) {
  const [host, port] = listen.split(':');
  return Promise.all(
    Array.from(
      { length: count },
      (_, i) =>
        new Promise((resolve) => {
          const req = request({ host, port: Number(port), path: `${tag}${i}`, agent }, (res) => {
            res.resume();
            res.once('end', () => resolve(res.statusCode));
          });
          req.once('error', () => resolve(0));
          req.end();
        }),
    ),
  );
}

function countFailed(statuses) {
  return statuses.filter((status) => status !== 200).length;
}

/**
 * An upstream that notes when requests reach it, per tag (a path up to its last `/`): how many came,
 * and when the last one did. O(1) per request: the bench must not slow down what it measures.
 */
async function recordingUpstream() {
  const tags = new Map();
  const waiters = new Map();
  const server = createServer((req, res) => {
    const url = req.url ?? '/';
    const tag = url.slice(0, url.lastIndexOf('/') + 1);
    const seen = tags.get(tag) ?? { count: 0, last: 0 };
    seen.count++;
    seen.last = performance.now();
    tags.set(tag, seen);
    waiters.get(tag)?.();
    req.resume();
    res.end('ok');
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const count = (tag) => tags.get(tag)?.count ?? 0;
  return {
    address: `127.0.0.1:${server.address().port}`,
    count,
    /** Resolves with the arrival time of the last of `size` requests tagged `tag`, once all came. */
    lastOf(tag, size) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(tag);
          reject(new Error(`only ${count(tag)} of ${size} requests ${tag}… reached the upstream`));
        }, heldTimeoutMs);
        const check = () => {
          if (count(tag) < size) return;
          clearTimeout(timer);
          waiters.delete(tag);
          resolve(tags.get(tag).last);
        };
        waiters.set(tag, check);
        check();
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
