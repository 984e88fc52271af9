/**
 * A small fixed-rate HTTP load generator for the demo, the zero-failure tests and the cutover
 * benchmark: it sends `rate` requests per second over keep-alive connections for as long as it
 * runs, and records for every request when it was sent, how long it took, its status, which
 * version answered (the demo app's JSON body) and any socket error. autocannon measures maximum
 * throughput in the benchmarks; this answers "did any request fail, and who served it".
 *
 *   const load = startLoad({ url, rate: 500 });  …  const result = await load.stop();
 */

import { fork } from 'node:child_process';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

/**
 * Bounded: at most this many requests in flight by default (a request due past it is recorded as
 * 'load generator saturated', not sent); more would be a thundering herd, not a rate. The requests
 * share 64 keep-alive connections: past 64, they wait here for one, never at the server.
 */
const defaultMaxInFlight = 256;
/** How often the worker hands finished records over to the caller's thread. */
const batchMs = 50;

/** Milliseconds since the epoch, sub-millisecond, on the same clock in every thread. */
const epochNow = () => performance.timeOrigin + performance.now();

/**
 * The requests are sent from a worker thread: the caller's thread spawns processes, polls files and
 * parses JSON while the load runs (the benchmarks, the tests), and each of those stalls would
 * otherwise show as latency of the requests it delayed. Record times are milliseconds from the call
 * to startLoad, on the caller's clock.
 */
export function startLoad({
  url,
  rate,
  timeoutMs = 10_000,
  maxRequests = 1_000_000,
  maxInFlight = defaultMaxInFlight,
  ownProcess = false,
  http2 = false,
}) {
  const origin = epochNow();
  const records = [];
  const config = { loadWorker: true, url, rate, timeoutMs, maxRequests, maxInFlight, origin, http2 };
  // With `ownProcess`, a child process in a session of its own: Linux schedules each session as
  // one group (autogroup), so the processes the caller starts (a CLI under test) share the CPU
  // with the caller's group, not with the clients, just as with clients on other machines.
  const generator = ownProcess
    ? fork(new URL(import.meta.url), [JSON.stringify(config)], { detached: true, stdio: 'inherit' })
    : new Worker(new URL(import.meta.url), { workerData: config });
  // A load that is never stopped (a failed test) must not keep its process alive.
  generator.unref();
  if (ownProcess) generator.channel?.unref();
  let finished = null;
  const done = new Promise((resolve, reject) => {
    generator.on('message', (message) => {
      records.push(...message.records);
      if (message.done) {
        finished = message;
        resolve();
      }
    });
    generator.once('error', reject);
    // A child's 'exit' can come before its last messages; 'close' comes after them.
    generator.once(ownProcess ? 'close' : 'exit', (code) => {
      if (!finished) reject(new Error(`the load generator exited (${code}) before it was stopped`));
    });
  });
  done.catch(() => undefined);
  return {
    /** When the load started, in ms since the epoch: `sentAt` of a record is counted from here. */
    origin,
    /** Requests finished so far (for checks while the load runs), up to ~50 ms late. */
    records,
    /** The generator's process with `ownProcess` (else this one). */
    pid: ownProcess ? generator.pid : process.pid,
    async stop() {
      generator.ref();
      if (ownProcess) {
        generator.channel?.ref();
        generator.send('stop');
        await done;
        if (generator.exitCode === null && generator.signalCode === null)
          await new Promise((resolve) => generator.once('exit', resolve));
      } else {
        generator.postMessage('stop');
        await done;
        await generator.terminate();
      }
      return summarize(records, (epochNow() - origin - finished.startedAt) / 1000);
    },
  };
}

/** The generator itself, in the worker thread or the child process; `port` reaches the caller. */
function runLoad({ url, rate, timeoutMs, maxRequests, maxInFlight, origin, http2: overHttp2 }, port) {
  const now = () => epochNow() - origin;
  const target = new URL(url);
  // Over https the server's certificate is not checked: the tests and benches make their own.
  const secure = target.protocol === 'https:';
  const agent = secure
    ? new https.Agent({ keepAlive: true, maxSockets: 64, rejectUnauthorized: false })
    : new http.Agent({ keepAlive: true, maxSockets: 64 });
  const get = overHttp2 ? http2Client(target, timeoutMs) : http1Client(target, agent, timeoutMs, secure);
  let batch = [];
  let inFlight = 0;
  let stopped = false;
  let sent = 0;
  const startedAt = now();
  const pending = new Set();

  /** Counts the timer's wakeups: each record says which one sent it (one request per wakeup). */
  let wakeup = 0;
  const fire = (scheduledAt) => {
    const sentAt = now();
    const lateMs = sentAt - scheduledAt;
    if (inFlight >= maxInFlight || sent >= maxRequests) {
      batch.push({ sentAt, lateMs, wakeup, ms: 0, status: 0, error: 'load generator saturated' });
      return;
    }
    sent++;
    inFlight++;
    const record = {
      sentAt,
      lateMs,
      wakeup,
      ms: 0,
      status: 0,
      version: undefined,
      slot: undefined,
      error: undefined,
    };
    const done = new Promise((resolve) => get(record, resolve)).then(() => {
      const at = now();
      record.ms = at - sentAt;
      record.doneAt = at;
      inFlight--;
      batch.push(record);
      pending.delete(done);
    });
    pending.add(done);
  };

  const flush = (done) => {
    port.send({ records: batch, done, startedAt });
    batch = [];
  };
  const flusher = setInterval(() => flush(false), batchMs);

  // Requests go out one by one at their scheduled times (every 1000/rate ms), not in batches: a
  // batch of requests sent in the same millisecond queues at a single-process upstream and shows as
  // latency that no real client spacing would cause. When the thread was held back (a process
  // starting on the same cores, GC), the missed sends catch up at most `catchUpFactor` times the
  // rate instead of all at once, and each record keeps how late it was sent (`lateMs`): the summary
  // reports it, so a stalled generator is visible instead of being mistaken for a slow router.
  const intervalMs = 1000 / rate;
  const catchUpFactor = 4;
  const perWakeup = Math.max(1, Math.ceil((catchUpFactor * rate) / 1000));
  let scheduled = startedAt;
  let timer;
  const tick = () => {
    if (stopped) return;
    wakeup++;
    const at = now();
    for (let n = 0; n < perWakeup && scheduled <= at; n++) {
      fire(scheduled);
      scheduled += intervalMs;
    }
    timer = setTimeout(tick, Math.max(0, scheduled - now()));
  };
  timer = setTimeout(tick, 0);

  port.onStop(async () => {
    stopped = true;
    clearTimeout(timer);
    await Promise.all([...pending]);
    clearInterval(flusher);
    agent.destroy();
    get.close?.();
    flush(true);
    port.close();
  });
}

/** HTTP/1.1 (over TLS for https) on the agent's keep-alive connections: one GET per record. */
function http1Client(target, agent, timeoutMs, secure) {
  const client = secure ? https : http;
  return (record, resolve) => {
    const req = client.get(
      { host: target.hostname, port: target.port, path: target.pathname, agent, timeout: timeoutMs },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => {
          record.status = res.statusCode ?? 0;
          record.slot = res.headers['x-cutover-slot'];
          record.version = versionOf(body);
          resolve();
        });
        res.on('error', (error) => {
          record.error = error.code ?? error.message;
          resolve();
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (error) => {
      record.error = error.code ?? error.message;
      resolve();
    });
  };
}

/** Sessions a HTTP/2 load spreads its streams over, as a few browsers would. */
const http2Sessions = 4;

/**
 * HTTP/2 (h2 over TLS for https, h2c with prior knowledge for http): streams spread over a few
 * sessions, a session that closed replaced by a new one for the next requests.
 */
function http2Client(target, timeoutMs) {
  const origin = `${target.protocol}//${target.host}`;
  const sessions = new Array(http2Sessions).fill(null);
  let next = 0;
  const session = () => {
    const index = next++ % http2Sessions;
    const current = sessions[index];
    if (current && !current.closed && !current.destroyed) return current;
    const fresh = http2.connect(origin, { rejectUnauthorized: false });
    fresh.on('error', () => undefined);
    fresh.on('goaway', () => fresh.close());
    sessions[index] = fresh;
    return fresh;
  };
  const get = (record, resolve) => {
    let stream;
    try {
      stream = session().request({ ':path': target.pathname });
    } catch (error) {
      record.error = error.code ?? error.message;
      resolve();
      return;
    }
    stream.setTimeout(timeoutMs, () => stream.close(http2.constants.NGHTTP2_CANCEL));
    let body = '';
    let headers = {};
    stream.setEncoding('utf8');
    stream.on('response', (h) => {
      headers = h;
    });
    stream.on('data', (chunk) => {
      body += chunk;
    });
    stream.on('end', () => {
      record.status = Number(headers[':status'] ?? 0);
      record.slot = headers['x-cutover-slot'];
      record.version = versionOf(body);
      resolve();
    });
    stream.on('error', (error) => {
      record.error = error.code ?? error.message;
      resolve();
    });
    stream.on('close', () => {
      if (record.status === 0 && !record.error) record.error = `stream closed (${stream.rstCode})`;
      resolve();
    });
  };
  get.close = () => {
    for (const s of sessions) s?.close();
  };
  return get;
}

/** The demo app's version, from its JSON body. */
function versionOf(body) {
  try {
    return JSON.parse(body).version;
  } catch {
    return undefined;
  }
}

if (!isMainThread && workerData?.loadWorker) {
  runLoad(workerData, {
    send: (message) => parentPort.postMessage(message),
    onStop: (stop) => parentPort.once('message', stop),
    close: () => parentPort.close(),
  });
} else if (process.send && process.argv[2]?.includes('"loadWorker":true')) {
  // The child process of `ownProcess`; it ends with its caller (a crashed bench leaves nothing).
  process.once('disconnect', () => process.exit(0));
  let sending = Promise.resolve();
  runLoad(JSON.parse(process.argv[2]), {
    send: (message) => {
      sending = new Promise((resolve) => process.send(message, resolve));
    },
    onStop: (stop) => process.once('message', stop),
    close: () => sending.then(() => process.disconnect()),
  });
}

export function summarize(records, seconds) {
  const ok = records.filter((r) => !r.error && r.status >= 200 && r.status < 300);
  const failed = records.length - ok.length;
  const latencies = ok.map((r) => r.ms).sort((a, b) => a - b);
  const pct = (p, sorted = latencies) =>
    sorted.length === 0
      ? Number.NaN
      : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  const lateness = records.map((r) => r.lateMs ?? 0).sort((a, b) => a - b);
  const versions = {};
  for (const r of ok) versions[r.version ?? '?'] = (versions[r.version ?? '?'] ?? 0) + 1;
  return {
    requests: records.length,
    failed,
    failures: records.filter((r) => r.error || r.status < 200 || r.status >= 300).slice(0, 5),
    rate: records.length / seconds,
    p50: pct(50),
    p99: pct(99),
    /** How late the generator sent its requests (its own stalls, not the server's): p99 and worst. */
    lateP99: pct(99, lateness),
    lateMax: lateness.at(-1) ?? 0,
    versions,
    records,
  };
}

export function formatLoad(result) {
  const versions = Object.entries(result.versions)
    .map(([v, n]) => `${n} from ${v}`)
    .join(', ');
  return `${result.requests} requests (${result.rate.toFixed(0)}/s), ${result.failed} failed, p50 ${result.p50.toFixed(1)} ms, p99 ${result.p99.toFixed(1)} ms; ${versions}`;
}
