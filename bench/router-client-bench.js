/**
 * Router upstream client A/B (issue 17): undici's `Pool`/`dispatch` against the router's own
 * HTTP/1.1 client and response parser (router/upstream-pool.ts, router/http1-response.ts), in the
 * same run, on the same upstream (examples/app, node:http), under the same load.
 *
 * The two are measured in the same minimal proxy (bench/router-client-proxy.js): one Node process,
 * a node:http server in front, the router's header rules, a keep-alive pool behind; the builds differ
 * only in the upstream client, so the comparison isolates it. The real router (`cutover proxy`) and
 * nginx (one worker, client keep-alive, the file the nginx driver writes) run beside them as
 * reference points.
 *
 * Each round measures every proxy, in an order rotated from round to round (other work on the
 * machine comes and goes): autocannon at full speed (32 connections, after a 1 s warm-up) for
 * throughput and p99, then the proxy process's CPU time per request (user + system from /proc) at a
 * fixed 3,000 requests/s. A warm-up pass over every proxy comes first and is not counted. Ratios
 * undici / own are taken within each round, then the median across rounds. The rule: undici
 * replaces the router's client if its CPU per request is within 10 % of it.
 *
 *   npm run bench -- router-client [--quick]
 */
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createNginxDriver } from '../dist/engine/drivers/nginx-driver.js';
import { createRouteTableDriver } from '../dist/engine/drivers/router-driver.js';
import { StateDir } from '../dist/engine/store/state-dir.js';
import {
  cannon,
  childPids,
  connections,
  cpuPerRequest,
  cpuRate,
  ownedProcesses,
  setRoute,
  startNginx,
  waitAnswers,
} from './router-support.js';
import { freePort, median, recordedGoal, withTempDir } from './support.js';

export const name = 'router-client';
export const title =
  "router-client: undici's Pool against the router's own upstream client (same proxy, same run)";
export const columns = [
  { key: 'measurement', label: 'proxy' },
  { key: 'reqPerSec', label: 'req/s', format: (v) => v.toFixed(0) },
  { key: 'p50', label: 'p50 ms', format: (v) => v.toFixed(0) },
  { key: 'p99', label: 'p99 ms', format: (v) => v.toFixed(0) },
  { key: 'cpuUs', label: `CPU µs/req at ${cpuRate}/s`, format: (v) => v.toFixed(1) },
  { key: 'systemUs', label: 'of it system µs', format: (v) => v.toFixed(1) },
  { key: 'fixedP99', label: `p99 ms at ${cpuRate}/s`, format: (v) => v.toFixed(0) },
  { key: 'failed', label: 'failed', format: String },
];

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const cliPath = join(repoRoot, 'bin', 'cutover.js');
const appPath = join(repoRoot, 'examples', 'app', 'server.js');
const proxyPath = fileURLToPath(new URL('./router-client-proxy.js', import.meta.url));
/** The rule: undici replaces the router's client if it costs at most 10 % more CPU per request. */
const cpuRatioLimit = 1.1;
const fullRounds = 5;
const quickSeconds = 2;
const warmupSeconds = 3;
const startTimeoutMs = 15_000;

export async function run({ quick, log }) {
  const rounds = quick ? 1 : fullRounds;
  const seconds = quick ? quickSeconds : undefined;
  return withTempDir('router-client', async (dir) => {
    const owned = ownedProcesses();
    try {
      const { targets, undiciSource } = await startTargets(dir, owned);
      const runs = Object.fromEntries(targets.map((t) => [t.key, []]));
      const loads = [];
      // Not counted: the first requests compile undici's llhttp (WebAssembly) and JIT both clients,
      // partly on background threads whose CPU time /proc counts for the process.
      for (const target of targets)
        await cannon(`${target.label}, warm-up`, target.address, log, warmupSeconds);
      for (let round = 0; round < rounds; round++) {
        loads.push(loadavg()[0]);
        // Rotated: no proxy always goes first (on a cold machine) or right after nginx.
        const order = targets.map((_, i) => targets[(i + round) % targets.length]);
        for (const target of order) {
          const label = `${target.label}, round ${round + 1}/${rounds}`;
          const speed = await cannon(label, target.address, log, seconds);
          log(`CPU per request at ${cpuRate} req/s: ${label}`);
          const cpu = await cpuPerRequest(target.address, target.pids, seconds);
          runs[target.key].push({
            reqPerSec: speed.reqPerSec,
            p50: speed.p50,
            p99: speed.p99,
            cpuUs: cpu.total,
            systemUs: cpu.system,
            fixedP99: cpu.p99,
            failed: speed.failed + cpu.failed,
          });
        }
      }
      return summarise(targets, runs, rounds, loads, undiciSource);
    } finally {
      await owned.stopAll();
    }
  });
}

/** The upstream app, the two minimal proxies, `cutover proxy` and nginx, each routing to the app. */
async function startTargets(dir, owned) {
  const appPort = await freePort();
  owned.start(process.execPath, [appPath], {
    env: { ...process.env, PORT: String(appPort), VERSION: 'bench' },
  });
  const app = `127.0.0.1:${appPort}`;
  await waitAnswers(app);

  const minimal = async (client) => {
    const port = await freePort();
    const child = owned.start(process.execPath, [proxyPath, client, String(port), app], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const ready = await readyLine(child, client);
    child.stdout.resume();
    return { child, address: `127.0.0.1:${port}`, source: ready.replace(/^ready /, '') };
  };
  const own = await minimal('own');
  const undici = await minimal('undici');

  const routerListen = `127.0.0.1:${await freePort()}`;
  const stateDir = join(dir, 'state');
  // A driver's context holds a StateDir, not its path (router-bench.js does the same).
  await setRoute(
    createRouteTableDriver(),
    { stateDir: StateDir.at(stateDir), baseDir: stateDir },
    routerListen,
    app,
  );
  const router = owned.start(process.execPath, [cliPath, 'proxy', '--state-dir', stateDir]);
  await waitAnswers(routerListen);

  const nginxListen = `127.0.0.1:${await freePort()}`;
  const nginx = await startNginx(join(dir, 'nginx'), owned);
  await setRoute(createNginxDriver(), nginx.ctx, nginxListen, app);
  // Client keep-alive on: nginx as it is usually run (the driver's file turns it off, see nginx-driver.ts).
  const configFile = join(nginx.dir, 'routes.conf');
  const generated = await readFile(configFile, 'utf8');
  await writeFile(configFile, generated.replaceAll(/^\s*keepalive_timeout 0;.*\n/gm, ''));
  await nginx.reload();
  await waitAnswers(nginxListen);

  return {
    undiciSource: undici.source,
    targets: [
      { key: 'own', label: 'minimal proxy, own client', address: own.address, pids: () => [own.child.pid] },
      {
        key: 'undici',
        label: 'minimal proxy, undici Pool',
        address: undici.address,
        pids: () => [undici.child.pid],
      },
      { key: 'router', label: 'cutover proxy', address: routerListen, pids: () => [router.pid] },
      {
        key: 'nginx',
        label: 'nginx (1 worker)',
        address: nginxListen,
        pids: () => childPids(nginx.masterPid),
      },
    ],
  };
}

/** The proxy's first line on stdout (`ready …`), or an error when it exits or stays silent. */
async function readyLine(child, client) {
  const lines = createInterface({ input: child.stdout });
  const timer = setTimeout(() => child.kill('SIGKILL'), startTimeoutMs);
  try {
    const [line] = await Promise.race([
      once(lines, 'line'),
      once(child, 'exit').then(([code, signal]) => {
        throw new Error(
          `bench/router-client-proxy.js ${client} exited (${code ?? signal}) before it listened`,
        );
      }),
    ]);
    return line;
  } finally {
    clearTimeout(timer);
    lines.close();
  }
}

function summarise(targets, runs, rounds, loads, undiciSource) {
  const middle = (list, key) => median(list.map((r) => r[key]));
  const rows = targets.map((t) => ({
    measurement: `${t.label} (median of ${rounds})`,
    reqPerSec: middle(runs[t.key], 'reqPerSec'),
    p50: middle(runs[t.key], 'p50'),
    p99: middle(runs[t.key], 'p99'),
    cpuUs: middle(runs[t.key], 'cpuUs'),
    systemUs: middle(runs[t.key], 'systemUs'),
    fixedP99: middle(runs[t.key], 'fixedP99'),
    failed: runs[t.key].reduce((n, r) => n + r.failed, 0),
  }));
  // Paired within each round: undici and own ran minutes apart at most, under the same background.
  const perRound = (key) => runs.undici.map((u, i) => u[key] / runs.own[i][key]);
  const ratio = (key) => median(perRound(key));
  const list = (values) => values.map((v) => v.toFixed(2)).join(', ');
  const cpuRatio = ratio('cpuUs');
  const replace = cpuRatio <= cpuRatioLimit;
  const own = rows[0];
  const undici = rows[1];
  return {
    rows,
    rounds: runs,
    ratios: {
      cpu: cpuRatio,
      throughput: ratio('reqPerSec'),
      p99: ratio('p99'),
      cpuPerRound: perRound('cpuUs'),
      throughputPerRound: perRound('reqPerSec'),
    },
    decision: replace ? 'replace' : 'keep',
    goals: [
      // A decision, not a goal: either outcome is a valid result of the bench.
      recordedGoal({
        label: `undici / own CPU per request at ${cpuRate} req/s (median of ${rounds} per-round ratios; the issue replaces the own client if ≤ ${cpuRatioLimit.toFixed(2)})`,
        value: cpuRatio,
        target: `(decision: replace if ≤ ${cpuRatioLimit.toFixed(2)})`,
        detail: `${replace ? 'replace' : 'keep'}; per round ${list(perRound('cpuUs'))}`,
      }),
    ],
    notes: [
      `undici: ${undiciSource}; own: router/upstream-pool.ts + router/http1-response.ts (dist/)`,
      `undici / own, median of per-round ratios: CPU per request ${cpuRatio.toFixed(2)} (${list(perRound('cpuUs'))}), throughput ${ratio('reqPerSec').toFixed(2)} (${list(perRound('reqPerSec'))}), p99 at full speed ${ratio('p99').toFixed(2)}`,
      `CPU per request: undici ${undici.cpuUs.toFixed(1)} µs against own ${own.cpuUs.toFixed(1)} µs (medians); cutover proxy ${rows[2].cpuUs.toFixed(1)} µs, nginx ${rows[3].cpuUs.toFixed(1)} µs`,
      `decision by the 10 % rule: ${replace ? 'undici is within 10 %: replace router/http1-response.ts and upstream-pool.ts' : 'undici costs more than 10 % more CPU per request: keep the own client'}`,
      `autocannon: ${connections} connections at full speed; CPU at a fixed ${cpuRate} req/s over 16 connections; latency in whole ms; load average (1 min) at the start of each round: ${loads.map((l) => l.toFixed(2)).join(', ')}`,
      'the minimal proxies leave out routing, in-flight counting, retries and request bodies (the same code whichever client carries a request), so they cost less than cutover proxy',
    ],
  };
}
