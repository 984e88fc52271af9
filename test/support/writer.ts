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
}

export interface Writer {
  stop(): Promise<WriteRecord[]>;
}

export function startWriter(url: string, rate: number, prefix = 'w'): Writer {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const target = new URL(url);
  const records: WriteRecord[] = [];
  const pending = new Set<Promise<void>>();
  let n = 0;
  // One write: sent again once if it failed on a reused keep-alive connection before any answer
  // (the server closed it as idle while this request was on its way: nothing reached the store).
  // Node's documentation gives this as what a client of keep-alive does (request.reusedSocket);
  // any other socket error counts as a failed write.
  const send = (key: string, sentAt: number, resend: boolean, resolve: () => void) => {
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
      if (resend && req.reusedSocket && error.code === 'ECONNRESET') {
        send(key, sentAt, false, resolve);
        return;
      }
      records.push({ key, sentAt, status: 0, ms: Date.now() - sentAt });
      resolve();
    });
    req.end();
  };
  const write = () => {
    const key = `${prefix}-${++n}`;
    const done = new Promise<void>((resolve) => send(key, Date.now(), true, resolve));
    pending.add(done);
    void done.then(() => pending.delete(done));
  };
  const started = Date.now();
  const timer = setInterval(() => {
    const due = Math.floor(((Date.now() - started) / 1000) * rate);
    while (n < due) write();
  }, 5);
  return {
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
