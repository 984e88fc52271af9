/**
 * Draining an nginx route. nginx does not tell how many requests are in flight to an upstream, but
 * its reload says when they are done: the workers of the previous configuration stop accepting,
 * finish the requests they carry (those to blue among them) and exit; while they do, their title
 * is `nginx: worker process is shutting down`. So blue is drained once no worker of the master
 * serving the route is shutting down. This waits for every old worker, not only those carrying
 * blue's requests: it may wait longer than needed (bounded by the drain timeout), never shorter.
 *
 * The master is found through the route's own listener: its generation answer names the worker
 * that served it (`workerHeader`), and that worker's parent is the master. Linux only (/proc):
 * elsewhere the driver cannot see the workers and does not wait.
 */
import { readdir, readFile } from 'node:fs/promises';
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseHostPort } from '../../core/host-port.js';
import type { DrainResult } from './types.js';

/** The header of the generation answer that names the nginx worker (its pid) that served it. */
export const workerHeader = 'x-cutover-worker';
/** How often the workers are looked at while old ones finish. */
export const nginxDrainPollIntervalMs = 100;
const workerRequestTimeoutMs = 2_000;

/**
 * Waits until no worker of the nginx serving `listen` is finishing the requests of an earlier
 * configuration. Resolves at the timeout with `drained: false` and the count of such workers;
 * rejects only when `signal` aborts. null: the workers cannot be seen (no /proc, no answer).
 */
export async function waitOldWorkersGone(
  listen: string,
  path: string,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<DrainResult | null> {
  const worker = await servingWorker(listen, path);
  if (worker === null) return null;
  const master = await parentOf(worker);
  if (master === null) return null;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    signal.throwIfAborted();
    const old = await shuttingDownChildren(master);
    if (old === 0) return { drained: true, inFlight: 0, unit: 'old nginx workers' };
    if (Date.now() >= deadline) return { drained: false, inFlight: old, unit: 'old nginx workers' };
    await sleep(Math.min(nginxDrainPollIntervalMs, deadline - Date.now()), undefined, { signal });
  }
}

/** The pid of the worker that answers `path` on `listen` now, or null. */
function servingWorker(listen: string, path: string): Promise<number | null> {
  const address = parseHostPort(listen);
  if (!address) return Promise.resolve(null);
  const host = { '0.0.0.0': '127.0.0.1', '::': '::1', '*': '127.0.0.1' }[address.host] ?? address.host;
  return new Promise((resolve) => {
    const req = request(
      { host, port: address.port, path, agent: false, timeout: workerRequestTimeoutMs },
      (res) => {
        res.resume();
        const pid = Number(res.headers[workerHeader]);
        resolve(Number.isInteger(pid) && pid > 0 ? pid : null);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(null));
    req.end();
  });
}

/** The parent pid of `pid` (field 4 of /proc/<pid>/stat, after the parenthesised name). */
async function parentOf(pid: number): Promise<number | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (stat === null) return null;
  const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  return Number.isInteger(parent) && parent > 1 ? parent : null;
}

/** How many children of `master` are nginx workers shutting down. */
async function shuttingDownChildren(master: number): Promise<number> {
  const entries = await readdir('/proc').catch(() => [] as string[]);
  let count = 0;
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if ((await parentOf(pid)) !== master) continue;
    const title = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (title.includes('shutting down')) count++;
  }
  return count;
}
