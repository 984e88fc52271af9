/**
 * Router over TLS against nginx terminating the same certificate (issue 31), side by side in one
 * run on one machine, each behind its own TLS listener in front of examples/app:
 *
 * - full TLS handshakes per second (TLS 1.3, a P-256 certificate, no session resumption), from 16
 *   clients in a process of their own (bench/tls-clients.js);
 * - requests per second over TLS with HTTP/1.1 keep-alive (autocannon, 32 connections);
 * - requests per second over HTTP/2 (4 sessions of 16 streams, bench/tls-clients.js).
 *
 * Rounds alternate router and nginx (nginx: one worker, `listen ssl http2`, TLSv1.2 and 1.3); each
 * figure's ratio is taken within a round, and the median of the rounds is reported. Every process
 * is stopped and every temp dir removed, also when the run is interrupted.
 */
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { createRouteTableDriver } from '../dist/engine/drivers/router-driver.js';
import { StateDir } from '../dist/engine/store/state-dir.js';
import { makeCertificate } from './certificates.js';
import { childPids, connections, ownedProcesses, startNginx } from './router-support.js';
import { freePort, median, recordedGoal, runNode, withTempDir } from './support.js';

export const name = 'router-tls';
export const title = 'router over TLS: handshakes and throughput against nginx with the same certificate';
export const columns = [
  { key: 'measurement', label: 'measurement' },
  { key: 'perSecond', label: 'per s', format: (v) => v.toFixed(0) },
  // The proxy's own CPU (user + system, from /proc) per handshake or request: less moved by other
  // work on a busy machine than the rate.
  { key: 'cpuUs', label: 'proxy CPU µs each', format: (v) => v.toFixed(0) },
  { key: 'failed', label: 'failed', format: String },
];

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const cliPath = join(repoRoot, 'bin', 'cutover.js');
const appPath = join(repoRoot, 'examples', 'app', 'server.js');
const clientsPath = join(repoRoot, 'bench', 'tls-clients.js');
const handshakeClients = 16;
const http2Sessions = 4;
const http2Streams = 16;

export async function run({ quick, ratios = false, log }) {
  const rounds = quick || ratios ? 2 : 3;
  const seconds = quick || ratios ? 2 : 4;
  const rows = [];
  const goals = [];
  const notes = [];
  await withTempDir('router-tls', async (dir) => {
    const owned = ownedProcesses();
    try {
      const { router, nginx, pids } = await startProxies(dir, owned);
      const targets = { router, nginx };
      // Both warmed up first: the router's code is optimised under load, nginx's caches filled.
      for (const address of Object.values(targets)) {
        await handshakesPerSecond(address, 1);
        await autocannon({ url: `https://${address}/`, connections, duration: 1 });
        await http2PerSecond(address, 1);
      }
      const figures = {
        handshakes: { router: [], nginx: [] },
        http1: { router: [], nginx: [] },
        http2: { router: [], nginx: [] },
      };
      const cpu = {
        handshakes: { router: [], nginx: [] },
        http1: { router: [], nginx: [] },
        http2: { router: [], nginx: [] },
      };
      /** The measure's rate, and the proxy's CPU per unit (µs). */
      const measured = async (key, measure) => {
        const before = cpuMs(pids[key]());
        const result = await measure();
        const used = cpuMs(pids[key]()) - before;
        return { ...result, cpuUs: (used * 1000) / Math.max(1, result.count) };
      };
      let failed = 0;
      for (let round = 1; round <= rounds; round++)
        for (const [key, address] of Object.entries(targets)) {
          log(`round ${round}/${rounds}: ${key}`);
          const results = {
            handshakes: await measured(key, () => handshakesPerSecond(address, seconds)),
            http1: await measured(key, () => http1PerSecond(address, seconds)),
            http2: await measured(key, () => http2PerSecond(address, seconds)),
          };
          for (const [figure, result] of Object.entries(results)) {
            figures[figure][key].push(result.perSecond);
            cpu[figure][key].push(result.cpuUs);
            failed += result.failed;
          }
        }
      const labels = {
        handshakes: 'full TLS handshakes (TLS 1.3, P-256, 16 clients)',
        http1: `HTTP/1.1 requests over TLS (autocannon, ${connections} keep-alive connections)`,
        http2: `HTTP/2 requests (${http2Sessions} sessions × ${http2Streams} streams)`,
      };
      for (const [figure, label] of Object.entries(labels)) {
        for (const key of ['router', 'nginx'])
          rows.push({
            measurement: `${label}: ${key === 'router' ? 'router' : 'nginx (1 worker)'}, median of ${rounds}`,
            perSecond: median(figures[figure][key]),
            cpuUs: median(cpu[figure][key]),
            failed: 0,
          });
        const roundRatios = figures[figure].router.map((r, i) => r / figures[figure].nginx[i]);
        const cpuRatios = cpu[figure].router.map((r, i) => r / cpu[figure].nginx[i]);
        goals.push(
          recordedGoal({
            label: `router / nginx rate: ${label} (median of ${rounds} per-round ratios)`,
            value: Number(median(roundRatios).toFixed(2)),
          }),
          recordedGoal({
            label: `router / nginx CPU each: ${label} (median of ${rounds} per-round ratios)`,
            value: Number(median(cpuRatios).toFixed(2)),
          }),
        );
        notes.push(
          `${figure} router / nginx per round: rate ${roundRatios.map((r) => r.toFixed(2)).join(', ')}; CPU each ${cpuRatios.map((r) => r.toFixed(2)).join(', ')}`,
        );
      }
      notes.push(`${failed} handshakes or requests failed in all`);
    } finally {
      await owned.stopAll();
    }
  });
  return { rows, goals, notes };
}

async function startProxies(dir, owned) {
  const { cert, key } = makeCertificate(dir, 'bench', ['bench.test']);
  const appPort = await freePort();
  owned.start(process.execPath, [appPath], {
    env: { ...process.env, PORT: String(appPort), VERSION: 'bench' },
  });
  const app = `127.0.0.1:${appPort}`;

  const router = `127.0.0.1:${await freePort()}`;
  const stateDir = join(dir, 'state');
  const spec = {
    listen: router,
    to: 'app',
    shift: [100],
    drain: { timeout: 10_000 },
    tls: { certificates: [{ cert, key }], minVersion: 'TLSv1.2', http2: true },
  };
  await createRouteTableDriver().apply(
    { environment: 'bench', migrationId: 'bench', stateDir: StateDir.at(stateDir), baseDir: stateDir },
    {
      route: 'app',
      spec,
      blue: { component: 'app', slot: 'blue', version: 'bench', addresses: [app] },
      green: null,
      greenPercent: 0,
    },
    { signal: new AbortController().signal, log: () => {} },
  );
  const routerProcess = owned.start(process.execPath, [cliPath, 'proxy', '--state-dir', stateDir]);

  const nginx = `127.0.0.1:${await freePort()}`;
  const server = await startNginx(join(dir, 'nginx'), owned);
  await writeFile(
    join(server.dir, 'routes.conf'),
    `upstream app { server ${app}; keepalive 32; }
server {
    listen ${nginx} ssl http2;
    ssl_certificate ${cert};
    ssl_certificate_key ${key};
    ssl_protocols TLSv1.2 TLSv1.3;
    # As the router: no cap on requests per connection (nginx's default closes after 1,000).
    keepalive_requests 1000000;
    location / {
        proxy_pass http://app;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
    }
}
`,
  );
  await server.reload();
  for (const address of [router, nginx]) await waitAnswersOverTls(address);
  return {
    router,
    nginx,
    pids: { router: () => [routerProcess.pid], nginx: () => childPids(server.masterPid) },
  };
}

async function waitAnswersOverTls(address) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const r = await autocannon({ url: `https://${address}/`, connections: 1, amount: 1 }).catch(() => null);
    if (r && r['2xx'] === 1) return;
    if (Date.now() > deadline) throw new Error(`${address} did not answer over TLS within 15 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function clients(args) {
  const result = await runNode([clientsPath, ...args.map(String)]);
  if (result.code !== 0) throw new Error(`bench/tls-clients.js ${args.join(' ')} failed: ${result.stderr}`);
  const { done, failed, seconds } = JSON.parse(result.stdout);
  return { perSecond: done / seconds, count: done, failed };
}

function handshakesPerSecond(address, seconds) {
  return clients(['handshakes', address, seconds, handshakeClients]);
}

function http2PerSecond(address, seconds) {
  return clients(['h2', address, seconds, http2Sessions, http2Streams]);
}

async function http1PerSecond(address, seconds) {
  const r = await autocannon({ url: `https://${address}/`, connections, duration: seconds });
  return { perSecond: r.requests.average, count: r.requests.total, failed: r.errors + r.timeouts + r.non2xx };
}

/** Linux counts process CPU in clock ticks of 10 ms (USER_HZ = 100). */
const msPerTick = 10;

/** CPU (user + system, ms) the processes have used so far. */
function cpuMs(pids) {
  let total = 0;
  for (const pid of pids) {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    total += (Number(fields[11]) + Number(fields[12])) * msPerTick;
  }
  return total;
}
