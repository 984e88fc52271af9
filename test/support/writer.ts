/**
 * A writer of uniquely keyed, acknowledged writes (issue 28's acceptance): `POST /put?k=<key>` at a
 * steady rate through a route; a key counts as acknowledged only on a 200. What a client saw of
 * each write is kept (status, latency) to judge the write hold: how long writes waited, and any
 * 5xx or socket error.
 */
import http from 'node:http';

export interface WriteRecord {
  key: string;
  sentAt: number;
  status: number; // 0: a socket error
  ms: number;
  /** For a socket error: its code, and whether it came on a reused keep-alive connection. */
  error?: string;
}

export interface Writer {
  stop(): Promise<WriteRecord[]>;
  /** How many writes sent at or after `sinceMs` (ms since the epoch) were acknowledged so far. */
  acknowledgedSince(sinceMs: number): number;
}

export function startWriter(url: string, rate: number, prefix = 'w'): Writer {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const target = new URL(url);
  const records: WriteRecord[] = [];
  const pending = new Set<Promise<void>>();
  let n = 0;
  // One write; any socket error counts as a failed write. (Until session 14 a write that failed on
  // a reused keep-alive connection was sent again once: that hid the router closing idle client
  // connections under the next burst, router/route-listeners.ts.)
  const send = (key: string, sentAt: number, resolve: () => void) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: 'POST',
        path: `/put?k=${key}`,
        agent,
        timeout: 15_000,
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          records.push({ key, sentAt, status: res.statusCode ?? 0, ms: Date.now() - sentAt });
          resolve();
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (error: NodeJS.ErrnoException) => {
      const cause = `${error.code ?? error.message}${req.reusedSocket ? ' on a reused connection' : ''}`;
      records.push({ key, sentAt, status: 0, ms: Date.now() - sentAt, error: cause });
      resolve();
    });
    req.end();
  };
  const write = () => {
    const key = `${prefix}-${++n}`;
    const done = new Promise<void>((resolve) => send(key, Date.now(), resolve));
    pending.add(done);
    void done.then(() => pending.delete(done));
  };
  const started = Date.now();
  const timer = setInterval(() => {
    const due = Math.floor(((Date.now() - started) / 1000) * rate);
    while (n < due) write();
  }, 5);
  return {
    acknowledgedSince: (sinceMs) => records.filter((r) => r.status === 200 && r.sentAt >= sinceMs).length,
    async stop() {
      clearInterval(timer);
      await Promise.all(pending);
      agent.destroy();
      return records.sort((a, b) => a.sentAt - b.sentAt);
    },
  };
}

/** The keys a store holds, through its route (GET /keys), and the version that answered. */
export async function storedKeys(url: string): Promise<{ version: string; keys: Set<string> }> {
  const res = await fetch(new URL('/keys', url));
  const body = (await res.json()) as { version: string; keys: string[] };
  return { version: body.version, keys: new Set(body.keys) };
}

/** p-th percentile (0–100) of `values`. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}
