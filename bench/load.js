/**
 * A small fixed-rate HTTP load generator for the demo, the zero-failure tests and the cutover
 * benchmark: it sends `rate` requests per second over keep-alive connections for as long as it
 * runs, and records for every request when it was sent, how long it took, its status, which
 * version answered (the demo app's JSON body) and any socket error. autocannon measures maximum
 * throughput in the benchmarks; this answers "did any request fail, and who served it".
 *
 *   const load = startLoad({ url, rate: 500 });  …  const result = await load.stop();
 */
import http from 'node:http';

/** Bounded: at most this many requests in flight; more would be a thundering herd, not a rate. */
const maxInFlight = 256;

export function startLoad({ url, rate, timeoutMs = 10_000, maxRequests = 1_000_000 }) {
  const target = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const records = [];
  let inFlight = 0;
  let stopped = false;
  let sent = 0;
  const started = performance.now();
  const pending = new Set();

  const fire = () => {
    if (inFlight >= maxInFlight || sent >= maxRequests) {
      records.push({
        sentAt: performance.now() - started,
        ms: 0,
        status: 0,
        error: 'load generator saturated',
      });
      return;
    }
    sent++;
    inFlight++;
    const sentAt = performance.now();
    const record = {
      sentAt: sentAt - started,
      ms: 0,
      status: 0,
      version: undefined,
      slot: undefined,
      error: undefined,
    };
    const done = new Promise((resolve) => {
      const req = http.get(
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
            try {
              record.version = JSON.parse(body).version;
            } catch {
              record.version = undefined;
            }
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
    }).then(() => {
      record.ms = performance.now() - sentAt;
      record.doneAt = performance.now() - started;
      inFlight--;
      records.push(record);
      pending.delete(done);
    });
    pending.add(done);
  };

  // A tick every 10 ms sends the requests due by then, so the rate holds without a timer per request.
  const tickMs = 10;
  let due = 0;
  const timer = setInterval(() => {
    if (stopped) return;
    const elapsed = performance.now() - started;
    const target = Math.floor((elapsed / 1000) * rate);
    while (due < target) {
      due++;
      fire();
    }
  }, tickMs);

  return {
    /** Requests finished so far (for checks while the load runs). */
    records,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await Promise.all([...pending]);
      agent.destroy();
      return summarize(records, (performance.now() - started) / 1000);
    },
  };
}

export function summarize(records, seconds) {
  const ok = records.filter((r) => !r.error && r.status >= 200 && r.status < 300);
  const failed = records.length - ok.length;
  const latencies = ok.map((r) => r.ms).sort((a, b) => a - b);
  const pct = (p) =>
    latencies.length === 0
      ? Number.NaN
      : latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))];
  const versions = {};
  for (const r of ok) versions[r.version ?? '?'] = (versions[r.version ?? '?'] ?? 0) + 1;
  return {
    requests: records.length,
    failed,
    failures: records.filter((r) => r.error || r.status < 200 || r.status >= 300).slice(0, 5),
    rate: records.length / seconds,
    p50: pct(50),
    p99: pct(99),
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
