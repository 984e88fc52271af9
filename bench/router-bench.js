/**
 * Router bench, in two parts, in one run on one machine:
 *
 * 1. Throughput and latency of one route to examples/app: at a fixed 500 requests/s (bench/load.js)
 *    directly, through the router (`cutover proxy`), through nginx (one worker) with the file the
 *    nginx route driver writes (client keep-alive off, see nginx-driver.ts) and with client
 *    keep-alive on; then autocannon at full speed (32 connections, 5 s after a 1 s warm-up, 3
 *    interleaved rounds, the median round) directly, through the router and through nginx with
 *    keep-alive (the usual nginx set-up, and the baseline of the goal). Then the CPU each proxy
 *    spends per request at a fixed 3,000 requests/s (user + system from /proc), 5 rounds, each
 *    proxy in turn: the router, nginx, and three reference proxies in Node that do less (Node's
 *    HTTP server with the router's client; Node's HTTP parser on the socket with the router's
 *    client; bytes piped through): the goal is the router's ratio to nginx, the references show
 *    how much of it Node's HTTP server is, and the floor any Node proxy stands on. The router and
 *    nginx are also measured with POSTs of 1 KiB (a body read whole, then sent upstream).
 * 2. Cutover latency: a fixed 500 requests/s through the router while the real CLI migrates
 *    examples/app to a new version with the process driver (shift 10 → 50 → 100 %), and while a
 *    version that went to 100% and waits for a manual commit is rolled back, twice per round: by
 *    the engine's call (`operate`, what `cutover server` runs for a rollback request) and by the
 *    CLI (a Node process starting on the same 2 cores while the load runs); 5 rounds, pooled.
 *    Requests, failures and p50/p99 before, during, while traffic moves, and after. The requests
 *    go out from a process of their own in a session of their own (bench/load.js, `ownProcess`):
 *    this process starting the CLI and polling the migration's state does not delay them, and
 *    under Linux's autogroup scheduling the CLI shares CPU with this session, not with the clients.
 *
 * Every process is stopped and every temp dir removed, also when the run is interrupted.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { summaryOf } from '../dist/core/migration/summary.js';
import { isFinal } from '../dist/core/migration/types.js';
import { createNginxDriver } from '../dist/engine/drivers/nginx-driver.js';
import { createRouteTableDriver } from '../dist/engine/drivers/router-driver.js';
import { noSecrets } from '../dist/engine/secrets/secret-source.js';
import { findMigration, loadState, operate } from '../dist/engine/services/migrations.js';
import { StateDir } from '../dist/engine/store/state-dir.js';
import {
  baselineDraws,
  baselineP99,
  movingMarginMs,
  phaseRows,
  pick,
  pooled,
  settleMs,
} from './cutover-phases.js';
import { startLoad } from './load.js';
import {
  cannon,
  childPids,
  connections,
  cpuPerRequest,
  cpuRate,
  cpuSeconds,
  durationSeconds,
  ownedProcesses,
  setRoute,
  startNginx,
  waitAnswers,
} from './router-support.js';
import { freePort, judgeGoal, median, runNode, strictGoal, withTempDir } from './support.js';

export const name = 'router';
export const title = 'router: throughput against the app and nginx; latency while traffic is cut over';
export const columns = [
  { key: 'measurement', label: 'measurement' },
  { key: 'reqPerSec', label: 'req/s', format: (v) => v.toFixed(0) },
  { key: 'requests', label: 'requests', format: String },
  { key: 'failed', label: 'failed', format: String },
  { key: 'p50', label: 'p50 ms', format: (v) => v.toFixed(2) },
  { key: 'p99', label: 'p99 ms', format: (v) => v.toFixed(2) },
  // How late the fixed-rate generator itself sent its requests (p99): its own stalls, not the router's.
  { key: 'lateP99', label: 'sent late p99 ms', format: (v) => v.toFixed(2) },
];

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const cliPath = join(repoRoot, 'bin', 'cutover.js');
const appPath = join(repoRoot, 'examples', 'app', 'server.js');
const loadRatePerSecond = 500;
const fixedRateMs = 3_000;
const migrationTimeoutMs = 120_000;
/** Issue 31: the router at least as fast as nginx. */
const throughputRatioGoal = 1;
/** Node's http.request and Agent as the upstream client gave about a third of nginx's throughput. */
const throughputRatioFailBelow = 0.35;
const addedP99GoalMs = 5;
/**
 * A p99 over a few hundred requests moves by milliseconds on a busy machine: twice the goal fails,
 * times the load average per core above 1 (support.js judgeGoal, wallClock).
 */
const addedP99FailBeyondMs = 10;
/**
 * The quick ratios run: router and nginx in turn, short rounds, the median of the per-round ratios:
 * on a busy machine (the test suite beside it) the load changes from one second to the next, and
 * only rounds taken close together see the same machine.
 */
const ratiosRounds = 5;
const ratiosSeconds = 1;
/** A router under load until the JIT has optimised its path (on a busy machine 1 s is not enough). */
const ratiosWarmupSeconds = 4;
/** Rounds of the cutover part: a rollback takes 20–60 ms, so a p99 needs several pooled. */
const cutoverRounds = 5;

/**
 * `ratios` (npm run bench:quick): the throughput against nginx only, one shorter round, and one
 * migration under load (no rollbacks, no p99 goal: one migration is too few requests for a p99),
 * so that the cutover part still runs to its end and its failed requests are counted.
 */
export async function run({ quick, ratios = false, log }) {
  const rounds = quick || ratios ? 1 : 3;
  const rows = [];
  const notes = [];
  const goals = [];
  await withTempDir('router', async (dir) => {
    const owned = ownedProcesses();
    try {
      const throughput = await measureThroughput(dir, owned, rounds, log, ratios);
      rows.push(...throughput.rows);
      goals.push(...throughput.goals);
      notes.push(...throughput.notes);
    } finally {
      await owned.stopAll();
    }
    const cutoverOptions = ratios
      ? { rounds: 1, rollbacks: false }
      : { rounds: quick ? 1 : cutoverRounds, rollbacks: true };
    const cutover = await measureCutover(join(dir, 'cutover'), cutoverOptions, log);
    rows.push(...cutover.rows);
    goals.push(...cutover.goals);
    notes.push(...cutover.notes);
  });
  return { rows, goals, notes };
}

// ---- part 1: throughput -------------------------------------------------------------------------

async function measureThroughput(dir, owned, rounds, log, ratios) {
  const appPort = await freePort();
  owned.start(process.execPath, [appPath], {
    env: { ...process.env, PORT: String(appPort), VERSION: 'bench' },
  });
  const app = `127.0.0.1:${appPort}`;
  await waitAnswers(app);

  const routerListen = `127.0.0.1:${await freePort()}`;
  const stateDir = join(dir, 'state');
  await setRoute(
    createRouteTableDriver(),
    { stateDir: StateDir.at(stateDir), baseDir: stateDir },
    routerListen,
    app,
  );
  const routerProcess = owned.start(process.execPath, [cliPath, 'proxy', '--state-dir', stateDir]);
  await waitAnswers(routerListen);

  const nginxListen = `127.0.0.1:${await freePort()}`;
  const nginx = await startNginx(join(dir, 'nginx'), owned);
  await setRoute(createNginxDriver(), nginx.ctx, nginxListen, app);

  // At a fixed 500 req/s first: the cost per request of the driver's "no client keep-alive".
  const rows = [];
  const fixed = async (label, address) => {
    log(`latency at ${loadRatePerSecond} req/s: ${label}`);
    const load = startLoad({ url: `http://${address}/`, rate: loadRatePerSecond, ownProcess: true });
    await sleep(fixedRateMs);
    const s = await load.stop();
    rows.push({ measurement: `${loadRatePerSecond} req/s: ${label}`, ...pick(s, fixedRateMs / 1000) });
  };
  if (!ratios) {
    await fixed('direct', app);
    await fixed('router', routerListen);
    await fixed('nginx as the driver writes it (no client keep-alive)', nginxListen);
  }
  // The same route with client keep-alive on: nginx as it is usually run, the baseline of the goal.
  const configFile = join(nginx.dir, 'routes.conf');
  const generated = await readFile(configFile, 'utf8');
  await writeFile(configFile, generated.replaceAll(/^\s*keepalive_timeout 0;.*\n/gm, ''));
  await nginx.reload();
  if (!ratios) await fixed('nginx, client keep-alive on', nginxListen);

  // Interleaved rounds, the median round of each: other work on the machine comes and goes.
  const targets = {
    ...(ratios ? {} : { direct: ['direct (examples/app)', app] }),
    router: ['router (cutover proxy)', routerListen],
    nginx: ['nginx, client keep-alive on', nginxListen],
  };
  const runs = { direct: [], router: [], nginx: [] };
  const cannonRounds = ratios ? ratiosRounds : rounds;
  for (let round = 1; round <= cannonRounds; round++)
    for (const [key, [label, address]] of Object.entries(targets)) {
      const speed = ratios
        ? await cannon(
            `${label}, round ${round}/${cannonRounds}`,
            address,
            log,
            ratiosSeconds,
            round === 1 ? ratiosWarmupSeconds : 0,
          )
        : await cannon(`${label}, round ${round}/${rounds}`, address, log);
      runs[key].push(speed);
    }
  const medianRun = (key) => {
    const sorted = [...runs[key]].sort((a, b) => a.reqPerSec - b.reqPerSec);
    const row = sorted[(sorted.length - 1) >> 1];
    rows.push({ ...row, measurement: `autocannon: ${targets[key][0]} (median of ${cannonRounds})` });
    return row;
  };
  const direct = ratios ? null : medianRun('direct');
  const router = medianRun('router');
  const nginxKeepAlive = medianRun('nginx');
  const roundRatios = runs.router.map((r, i) => r.reqPerSec / runs.nginx[i].reqPerSec);
  const ratio = ratios ? median(roundRatios) : router.reqPerSec / nginxKeepAlive.reqPerSec;

  // CPU per request at a fixed rate that saturates nothing: the proxies' own cost, free of how the
  // scheduler shares 2 cores between load generator, app and proxy (which moves the figures above).
  // Beside the router and nginx, three reference proxies in Node (bench/proxy-floors.js,
  // bench/router-client-proxy.js): what a Node process must spend at the least, in one run.
  const cpu = ratios
    ? null
    : await measureCpu(owned, app, { routerListen, routerProcess, nginxListen, nginx }, rounds, log);
  return {
    rows,
    goals: [
      judgeGoal({
        label: ratios
          ? `router / nginx throughput (autocannon, ${connections} connections, median of ${ratiosRounds} rounds of ${ratiosSeconds} s in turn; nginx: 1 worker, client keep-alive)`
          : `router / nginx throughput (autocannon, ${connections} connections, ${durationSeconds} s; nginx: 1 worker, client keep-alive)`,
        value: ratio,
        target: throughputRatioGoal,
        atMost: false,
        failBeyond: throughputRatioFailBelow,
      }),
      ...(cpu ? [cpu.goal] : []),
    ],
    notes: [
      `${direct ? `router / direct throughput: ${(router.reqPerSec / direct.reqPerSec).toFixed(2)}; ` : ''}router / nginx per round: ${roundRatios.map((r) => r.toFixed(2)).join(', ')}`,
      'examples/app is one Node process, so "direct" is the ceiling; nginx runs one worker, the router is one Node process',
      ...(cpu ? cpu.notes : []),
      "autocannon reports latency in whole milliseconds; it cannot drive a server that closes every connection (it loses the request it pipelines after the response), so the driver's own nginx file is measured at the fixed rate only",
    ],
  };
}

/**
 * Proxies whose CPU per request is measured in turn, each round in the same order: the router,
 * nginx, and three references in Node that do less than the router, so that a run shows what of
 * the router's cost Node's HTTP server and the router's own work each are.
 */
const cpuTargets = [
  ['router', 'router (cutover proxy)'],
  ['nginx', 'nginx (1 worker, client keep-alive)'],
  ['http', "Node's HTTP server + the router's client (bench/router-client-proxy.js own)"],
  [
    'llhttp',
    "Node's HTTP parser on the socket + the router's client, no HTTP server (bench/proxy-floors.js llhttp)",
  ],
  ['pipe', 'bytes piped through, nothing parsed (bench/proxy-floors.js pipe): the floor of a proxy in Node'],
];

/** A request with a small body, as an API client sends. */
const postRequest = { method: 'POST', body: 'x'.repeat(1024), headers: { 'content-type': 'text/plain' } };

async function measureCpu(owned, app, { routerListen, routerProcess, nginxListen, nginx }, rounds, log) {
  const reference = async (script, mode) => {
    const port = await freePort();
    const child = owned.start(process.execPath, [join(repoRoot, 'bench', script), mode, String(port), app]);
    const address = `127.0.0.1:${port}`;
    await waitAnswers(address);
    return { address, pids: () => [child.pid] };
  };
  const targets = {
    router: { address: routerListen, pids: () => [routerProcess.pid] },
    nginx: { address: nginxListen, pids: () => childPids(nginx.masterPid) },
    http: await reference('router-client-proxy.js', 'own'),
    llhttp: await reference('proxy-floors.js', 'llhttp'),
    pipe: await reference('proxy-floors.js', 'pipe'),
  };
  // The references are new processes: their code is optimised under load first, as the router's was.
  for (const key of ['http', 'llhttp', 'pipe'])
    await cannon(`warm-up: ${key}`, targets[key].address, log, 2, 0);
  // So is the router's path for requests with a body, which the rounds above did not take.
  log('warm-up: POSTs through the router');
  await autocannon({ url: `http://${routerListen}/`, connections, duration: 3, ...postRequest });
  const cpu = Object.fromEntries(cpuTargets.map(([key]) => [key, []]));
  const posts = { router: [], nginx: [] };
  const cpuRounds = rounds === 1 ? 1 : cpuRoundsFull;
  const loads = [];
  for (let round = 1; round <= cpuRounds; round++) {
    log(`CPU per request at ${cpuRate} req/s, round ${round}/${cpuRounds}`);
    loads.push(loadavg()[0]);
    for (const [key] of cpuTargets)
      cpu[key].push(await cpuPerRequest(targets[key].address, targets[key].pids));
    // Requests with a body take another path (read whole, then sent with the head).
    for (const key of ['router', 'nginx'])
      posts[key].push(await cpuPerRequest(targets[key].address, targets[key].pids, cpuSeconds, postRequest));
  }
  const middle = (key, pick = (c) => c.total) => median(cpu[key].map(pick));
  // Ratios within each round (the same machine for both), then their median.
  const toNginx = (key) => median(cpu[key].map((c, i) => c.total / cpu.nginx[i].total));
  const ratio = toNginx('router');
  const failed = [...Object.values(cpu), ...Object.values(posts)].reduce(
    (n, list) => n + list.reduce((m, c) => m + c.failed, 0),
    0,
  );
  const postRatio = median(posts.router.map((c, i) => c.total / posts.nginx[i].total));
  return {
    goal: judgeGoal({
      label: `router / nginx CPU per request at ${cpuRate} req/s (user + system from /proc, median of ${cpuRounds} per-round ratios, ${cpuSeconds} s each)`,
      value: Number(ratio.toFixed(2)),
      target: cpuRatioGoal,
      failBeyond: cpuRatioFailBeyond,
    }),
    notes: [
      `CPU per request at ${cpuRate} req/s, median of ${cpuRounds} rounds (user + system from /proc; in brackets the system part, then the median of the per-round ratios to nginx); 1-minute load average ${loads.map((l) => l.toFixed(1)).join(', ')}${failed > 0 ? `; ${failed} requests failed` : ''}:`,
      ...cpuTargets.map(
        ([key, label]) =>
          `  ${label}: ${middle(key).toFixed(1)} µs (${middle(key, (c) => c.system).toFixed(1)}), ${toNginx(key).toFixed(2)} × nginx`,
      ),
      `  POST of ${postRequest.body.length} bytes (examples/app answers 405): router ${median(posts.router.map((c) => c.total)).toFixed(1)} µs, nginx ${median(posts.nginx.map((c) => c.total)).toFixed(1)} µs, ${postRatio.toFixed(2)} × nginx`,
    ],
  };
}

/** Rounds of the CPU comparison in a full run (one in a quick run). */
const cpuRoundsFull = 5;
/** Issue 31: the router's CPU per request within 1.2 times nginx's. */
const cpuRatioGoal = 1.2;
/**
 * Beyond this the router regressed: it was 2.0 on a quiet machine (2026-11-25) and 2.4–3.2 at load
 * averages of 5–27 (2026-11-27), where Node's share of cache and scheduler suffers more than nginx's.
 */
const cpuRatioFailBeyond = 3.5;

// ---- part 2: latency while traffic is cut over --------------------------------------------------

/**
 * `rounds` forward migrations (auto commit) and `rounds` rollbacks (of a migration that went to
 * 100% and waits for a manual commit), each under its own load. The phases of all rounds of a kind
 * are pooled: one migration gives only a few hundred requests "during", too few for a steady p99.
 */
async function measureCutover(scratch, { rounds, rollbacks }, log) {
  cpSync(join(repoRoot, 'examples', 'live-demo'), join(scratch, 'live-demo'), { recursive: true });
  cpSync(join(repoRoot, 'examples', 'app'), join(scratch, 'app'), { recursive: true });
  const dir = join(scratch, 'live-demo');
  const file = join(dir, 'topology.yaml');
  const port = await freePort();
  const text = readFileSync(file, 'utf8').replaceAll('127.0.0.1:18600', `127.0.0.1:${port}`);
  const write = (version, commit) =>
    writeFileSync(
      file,
      `${text.replace('version: "1.0.0"', `version: "${version}"`)}strategy:\n  commit: ${commit}\n`,
    );
  const url = `http://127.0.0.1:${port}/`;
  const cli = async (args) => {
    const r = await runNode([cliPath, ...args], { cwd: dir, timeoutMs: migrationTimeoutMs });
    if (r.code !== 0)
      throw new Error(`cutover ${args.join(' ')} exited ${r.code ?? r.signal}:\n${r.stderr.slice(-2000)}`);
    return r.stdout;
  };
  // Whatever happens (an error, ^C), the router and app processes the CLI started go away.
  const down = () =>
    spawnSync(process.execPath, [cliPath, 'topology', 'down', '--yes'], { cwd: dir, timeout: 60_000 });
  process.on('exit', down);
  try {
    log('cutover: 1.0.0 goes live');
    write('1.0.0', 'auto');
    await cli(['topology', 'migrate', '--yes']);
    const forward = [];
    // Rolled back by the engine's call (`operate`, what `cutover server` runs for POST
    // /v1/migrations/{id}/rollback), from this process; and by the CLI, a Node process starting on
    // the same 2 cores during the measurement (~150 ms of CPU), as an operator at this machine would.
    const rollback = [];
    const rollbackByCli = [];
    let live = 1;
    for (let round = 1; round <= rounds; round++) {
      const from = `${live}.0.0`;
      const to = `${live + 1}.0.0`;
      log(`cutover ${round}/${rounds}: ${from} → ${to} under ${loadRatePerSecond} requests/s`);
      write(to, 'auto');
      forward.push({
        ...(await underLoad(url, async () => {
          const { id } = JSON.parse(await cli(['topology', 'migrate', '--yes', '--json'])).summary;
          return cutoverWindow(dir, id, 'migration');
        })),
        oldVersion: from,
        newVersion: to,
      });
      live++;

      const doomed = `${live + 1}.0.0`;
      const kinds = [
        [rollback, 'by the engine call'],
        [rollbackByCli, 'by the CLI'],
      ];
      for (const [runs, how] of rollbacks ? kinds : []) {
        log(
          `cutover ${round}/${rounds}: ${doomed} goes to 100% and waits for commit; rolled back ${how} under load`,
        );
        write(doomed, 'manual');
        const { id } = JSON.parse(await cli(['topology', 'migrate', '--yes', '--detach', '--json'])).summary;
        await waitLifecycle(dir, id, (l) => l === 'awaiting_commit');
        const result = await underLoad(url, async () => {
          if (runs === rollbackByCli) await cli(['topology', 'migration', 'rollback', id]);
          else await operate(findMigration(StateDir.at(join(dir, '.cutover')), id), noSecrets, 'rollback');
          // Waiting reads the state here: a CLI polling or following the log would be one more
          // Node process starting during the measurement, which no rollback needs.
          await waitLifecycle(dir, id, isFinal);
          return cutoverWindow(dir, id, 'rollback');
        });
        const ended = await waitLifecycle(dir, id, () => true);
        if (ended !== 'rolled_back') throw new Error(`migration ${id} ended ${ended}, not rolled_back`);
        runs.push({ ...result, oldVersion: doomed, newVersion: `${live}.0.0` });
      }
    }

    const kinds = [
      ['migration', forward],
      ['rollback (engine call)', rollback],
      ['rollback (CLI)', rollbackByCli],
    ].filter(([, runs]) => runs.length > 0);
    const rows = kinds.flatMap(([label, runs]) => phaseRows(`${rounds} × ${label}`, runs));
    const addedP99 = (runs, which = 'during') => pooled(runs, which).p99 - baselineP99(runs, which);
    const failed = (runs) => runs.reduce((n, run) => n + run.summary.failed, 0);
    const goals = kinds.flatMap(([label, runs]) => [
      // One migration is too few requests for a p99 (the quick ratios run has one).
      ...(rounds > 1
        ? [
            judgeGoal({
              label: `p99 added during the ${label} (the cutover's own window against as many requests before it, ${loadRatePerSecond} req/s through the router, ${rounds} pooled)`,
              value: addedP99(runs),
              unit: 'ms',
              target: addedP99GoalMs,
              failBeyond: addedP99FailBeyondMs,
              // Each p99 is of a few hundred requests on 2 shared cores: at load 28 the p99s
              // themselves were 80–250 ms and their difference 110 ms, so the margin scales.
              wallClock: true,
            }),
          ]
        : []),
      strictGoal({
        label: `failed requests during the ${label.replace(/^(\S+)/, '$1s')} (${rounds})`,
        value: failed(runs),
        target: '= 0',
        pass: failed(runs) === 0,
        detail:
          failed(runs) > 0 ? JSON.stringify(runs.flatMap((r) => r.summary.failures).slice(0, 2)) : undefined,
      }),
    ]);
    return {
      rows,
      goals,
      notes: [
        `"during the cutover" is the engine's own window, from the migration's record: a migration from its start (after planning) to its end (green started and health-checked, traffic shifted 10 → 50 → 100 %, blue drained); a rollback from the runner taking the request (its log's rollback_started) to its end (routes back to blue, green retired). "while the command ran" is from giving the command to its return: for the CLI the whole life of a Node process on the same 2 cores (start, plan or request, exit); for the engine call, the call and the wait for the end`,
        `"traffic moving" from the first answer of the new version to the last of the old, ± ${movingMarginMs} ms (a rollback switches at once: its window is the gap between them)`,
        // Only with rollbacks measured: the quick ratios run has one migration and no rollback.
        ...(rollbacks
          ? [
              `p99 "added" compares like with like: a p99 over a few dozen requests (a rollback takes 20–60 ms) sits on the slowest few, so the baseline is the p99 of as many consecutive requests from a random place in each run's "before", pooled the same way (the median of ${baselineDraws} draws). p99 of all of "before" against that baseline: migration ${pooled(forward, 'before').p99.toFixed(2)} / ${baselineP99(forward, 'during').toFixed(2)} ms, rollback by the engine call ${pooled(rollback, 'before').p99.toFixed(2)} / ${baselineP99(rollback, 'during').toFixed(2)} ms, by the CLI ${pooled(rollbackByCli, 'before').p99.toFixed(2)} / ${baselineP99(rollbackByCli, 'during').toFixed(2)} ms`,
              `p99 added (same baseline) while the command ran: migration ${addedP99(forward, 'command').toFixed(2)} ms, rollback by the engine call ${addedP99(rollback, 'command').toFixed(2)} ms, by the CLI ${addedP99(rollbackByCli, 'command').toFixed(2)} ms; while traffic moved: ${addedP99(forward, 'moving').toFixed(2)}, ${addedP99(rollback, 'moving').toFixed(2)}, ${addedP99(rollbackByCli, 'moving').toFixed(2)} ms`,
            ]
          : []),
      ],
    };
  } finally {
    process.off('exit', down);
    down();
  }
}

/**
 * Runs `work` under the fixed load, with `settleMs` of load before and after. `work` resolves to
 * the cutover's own window, [start, end] in ms since the epoch as the migration's log has them;
 * `from`/`to` are when the command was given and when it returned (for the CLI: its whole life).
 */
async function underLoad(url, work) {
  const load = startLoad({ url, rate: loadRatePerSecond, ownProcess: true });
  const started = performance.now();
  await sleep(settleMs);
  const from = performance.now() - started;
  const [cutoverStart, cutoverEnd] = await work();
  const to = performance.now() - started;
  await sleep(settleMs);
  const summary = await load.stop();
  return { summary, from, to, cutoverFrom: cutoverStart - load.origin, cutoverTo: cutoverEnd - load.origin };
}

/**
 * When the engine began and ended the cutover, from the migration's own record: a migration from
 * its start (after planning) to its end; a rollback from the operator's request reaching the
 * runner (the `rollback_started` line of its log) to its end.
 */
function cutoverWindow(dir, id, kind) {
  const ref = findMigration(StateDir.at(join(dir, '.cutover')), id);
  const state = loadState(ref.stateDir, ref.environment, ref.id);
  const summary = summaryOf(state);
  if (summary.endedAt === null) throw new Error(`migration ${id} has not ended`);
  if (kind === 'migration') return [summary.startedAt, summary.endedAt];
  const log = readFileSync(ref.stateDir.migration(ref.environment, ref.id).log, 'utf8');
  const started = log
    .split('\n')
    .filter((line) => line.includes('"rollback_started"'))
    .map((line) => JSON.parse(line).at)
    .at(-1);
  if (started === undefined) throw new Error(`migration ${id}: no rollback_started in its log`);
  return [started, summary.endedAt];
}

/**
 * Polls the migration's state in the state directory beside the topology file. The journal is
 * replayed only when it changed: this runs during the measurement, on the same 2 cores.
 */
async function waitLifecycle(dir, id, done) {
  const ref = findMigration(StateDir.at(join(dir, '.cutover')), id);
  const { journal } = ref.stateDir.migration(ref.environment, ref.id);
  const deadline = Date.now() + migrationTimeoutMs;
  let seen = null;
  let lifecycle = null;
  for (;;) {
    const stat = statSync(journal, { throwIfNoEntry: false });
    const signature = stat ? `${stat.size}:${stat.mtimeMs}` : 'absent';
    if (signature !== seen) {
      seen = signature;
      lifecycle = loadState(ref.stateDir, ref.environment, ref.id).lifecycle;
    }
    if (done(lifecycle)) return lifecycle;
    if (Date.now() > deadline)
      throw new Error(`migration ${id} still ${lifecycle} after ${migrationTimeoutMs} ms`);
    await sleep(50);
  }
}

// ---- processes and ports ------------------------------------------------------------------------
