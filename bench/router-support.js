/**
 * What the router benches share (router-bench.js, router-client-bench.js, router-tls-bench.js,
 * write-hold-bench.js): autocannon runs, CPU per request of chosen processes, a real nginx with one
 * worker, a route set through a driver from dist/, and the bench's own long-running children.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { StateDir } from '../dist/engine/store/state-dir.js';

export const connections = 32;
export const durationSeconds = 5;
const warmupSeconds = 1;
const startTimeoutMs = 15_000;

export async function cannon(label, address, log, seconds = durationSeconds, warmUpSeconds = warmupSeconds) {
  const url = `http://${address}/`;
  log(`throughput (autocannon): ${label}`);
  if (warmUpSeconds > 0) await autocannon({ url, connections, duration: warmUpSeconds });
  const r = await autocannon({ url, connections, duration: seconds });
  const failed = r.errors + r.timeouts + r.non2xx;
  return {
    reqPerSec: r.requests.average,
    requests: r.requests.total,
    failed,
    p50: r.latency.p50,
    p99: r.latency.p99,
  };
}

export const cpuRate = 3_000;
export const cpuSeconds = 5;
/** Linux counts process CPU time in clock ticks of 10 ms (USER_HZ = 100). */
const msPerTick = 10;

/**
 * CPU time (user, system) used by `pids` while autocannon sends `cpuRate` requests/s to `address`,
 * per request in µs; and the p99 latency at that rate (autocannon's, whole ms).
 */
export async function cpuPerRequest(address, pids, seconds = cpuSeconds, request = {}) {
  const read = () =>
    pids().map((pid) => {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      return { user: Number(fields[11]) * msPerTick, system: Number(fields[12]) * msPerTick };
    });
  const sum = (list) =>
    list.reduce((a, t) => ({ user: a.user + t.user, system: a.system + t.system }), { user: 0, system: 0 });
  const before = sum(read());
  const r = await autocannon({
    url: `http://${address}/`,
    connections: 16,
    overallRate: cpuRate,
    duration: seconds,
    ...request,
  });
  const after = sum(read());
  const perRequest = (ms) => (ms * 1000) / Math.max(1, r.requests.total);
  return {
    total: perRequest(after.user - before.user + after.system - before.system),
    system: perRequest(after.system - before.system),
    requests: r.requests.total,
    // examples/app answers a POST 405, as it should: through the proxy that is no failure.
    failed: r.errors + r.timeouts + (request.method === 'POST' ? 0 : r.non2xx),
    p99: r.latency.p99,
  };
}

/** The children of a process (nginx's workers), by its pid. */
export function childPids(pid) {
  const out = spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' }).stdout;
  return out
    .split('\n')
    .map(Number)
    .filter((n) => n > 0);
}

/** One route, 100% on one address, through a route driver from dist/. */
export async function setRoute(driver, ctx, listen, address) {
  const spec = { listen, to: 'app', shift: [100], drain: { timeout: 10_000 } };
  const blue = { component: 'app', slot: 'blue', version: 'bench', addresses: [address] };
  await driver.apply(
    { environment: 'bench', migrationId: 'bench', ...ctx },
    { route: 'app', spec, blue, green: null, greenPercent: 0 },
    { signal: new AbortController().signal, log: () => {} },
  );
}

/** nginx in the foreground, one worker, everything under `dir`. */
export async function startNginx(dir, owned) {
  const probe = spawnSync('nginx', ['-v']);
  if (probe.error) throw new Error('nginx is not installed: apt-get install -y nginx (.ci/run does)');
  await mkdir(dir, { recursive: true });
  const conf = join(dir, 'nginx.conf');
  const errorLog = join(dir, 'error.log');
  const temps = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(
    (n) => `    ${n}_temp_path ${join(dir, n)};`,
  );
  await writeFile(
    conf,
    [
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${errorLog} warn;`,
      'worker_processes 1;',
      'events { worker_connections 4096; }',
      'http {',
      '    access_log off;',
      ...temps,
      `    include ${join(dir, 'routes.conf')};`,
      '}',
      '',
    ].join('\n'),
  );
  await writeFile(join(dir, 'routes.conf'), '');
  const base = ['-p', dir, '-c', conf, '-e', errorLog];
  const master = owned.start('nginx', [...base, '-g', 'daemon off;']);
  const deadline = Date.now() + startTimeoutMs;
  while (!existsSync(join(dir, 'nginx.pid'))) {
    if (Date.now() > deadline) throw new Error(`nginx did not start: ${await readFile(errorLog, 'utf8')}`);
    await sleep(20);
  }
  const reloadArgv = ['nginx', ...base, '-s', 'reload'];
  return {
    dir,
    masterPid: master.pid,
    ctx: {
      stateDir: StateDir.at(dir),
      baseDir: dir,
      driver: { type: 'nginx', configFile: 'routes.conf', reload: reloadArgv },
    },
    async reload() {
      const r = spawnSync(reloadArgv[0], reloadArgv.slice(1), { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`nginx reload failed: ${r.stderr}`);
      await sleep(500); // the old worker stops accepting ~100 ms after the new one starts
    },
  };
}

/** Long-running children of this bench: stopped by stopAll, or killed if the process exits first. */
export function ownedProcesses() {
  const children = new Set();
  const killAll = () => {
    // SIGTERM: nginx's master then stops its workers itself; a SIGKILL would orphan them.
    for (const child of children)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.on('exit', killAll);
  return {
    start(command, args, options = {}) {
      const child = spawn(command, args, { stdio: 'ignore', ...options });
      children.add(child);
      child.once('exit', () => children.delete(child));
      return child;
    },
    async stopAll() {
      process.off('exit', killAll);
      await Promise.all(
        [...children].map(async (child) => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = once(child, 'exit');
          child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
          await exited;
          clearTimeout(timer);
        }),
      );
    },
  };
}

/** Resolves once `address` answers GET / with 200. */
export async function waitAnswers(address) {
  const [host, port] = address.split(':');
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    const status = await new Promise((resolve) => {
      const req = request({ host, port: Number(port), path: '/', agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode);
      });
      req.on('error', () => resolve(0));
      req.end();
    });
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`${address} did not answer within ${startTimeoutMs} ms`);
    await sleep(50);
  }
}
