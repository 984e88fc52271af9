/**
 * A writer of uniquely keyed, acknowledged writes for the stateful bench (issue 28): `POST
 * /put?k=<prefix>-<n>` at a fixed rate, from a process of its own in a session of its own (as
 * bench/load.js with `ownProcess`: the CLI the bench starts shares the CPU with the bench's group,
 * not with the clients). A key counts as acknowledged only on a 200. Each record keeps when the
 * write was sent (ms since the epoch), how long it took, its status, the version that answered
 * (the key store's `x-version` header), a socket error, and how late the writer sent it (its own
 * stalls, not the router's).
 *
 *   const writer = startKeyedWriter({ url, rate: 200, prefix: 'a' });  …  await writer.stop();
 */
import { fork } from 'node:child_process';
import http from 'node:http';

/** Enough sockets that every write held at 1,000/s during a 1 s hold is at the router, not queued here. */
const maxSockets = 2_048;
const timeoutMs = 15_000;
const marker = '"keyedWriter":true';

/** Starts the writer; `stop()` resolves with every record, sorted by when it was sent. */
export function startKeyedWriter({ url, rate, prefix }) {
  const config = { keyedWriter: true, url, rate, prefix };
  const child = fork(new URL(import.meta.url), [JSON.stringify(config)], {
    detached: true,
    stdio: 'inherit',
  });
  // A writer that is never stopped (a failed bench) must not keep this process alive.
  child.unref();
  child.channel?.unref();
  let records = null;
  const done = new Promise((resolve, reject) => {
    child.on('message', (message) => {
      if (message.records) {
        records = message.records;
        resolve();
      }
    });
    child.once('error', reject);
    child.once('close', (code) => {
      if (!records) reject(new Error(`the keyed writer exited (${code}) before it was stopped`));
    });
  });
  done.catch(() => undefined);
  return {
    pid: child.pid,
    /** Stops it at once, records lost (an interrupted bench). */
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
    async stop() {
      child.ref();
      child.channel?.ref();
      child.send('stop');
      await done;
      if (child.exitCode === null && child.signalCode === null)
        await new Promise((resolve) => child.once('exit', resolve));
      return records.sort((a, b) => a.sentAt - b.sentAt);
    },
  };
}

function runWriter({ url, rate, prefix }) {
  const now = () => performance.timeOrigin + performance.now();
  const target = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets });
  const records = [];
  const pending = new Set();
  let n = 0;
  const write = (scheduledAt) => {
    const key = `${prefix}-${++n}`;
    const sentAt = now();
    const record = {
      key,
      sentAt,
      lateMs: sentAt - scheduledAt,
      ms: 0,
      status: 0,
      version: null,
      error: null,
    };
    const done = new Promise((resolve) => {
      const req = http.request(
        {
          host: target.hostname,
          port: target.port,
          method: 'POST',
          path: `/put?k=${key}`,
          agent,
          timeout: timeoutMs,
        },
        (res) => {
          record.status = res.statusCode ?? 0;
          record.version = res.headers['x-version'] ?? null;
          res.resume();
          res.once('end', resolve);
          res.once('error', (error) => {
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
      req.end();
    }).then(() => {
      record.ms = now() - sentAt;
      records.push(record);
      pending.delete(done);
    });
    pending.add(done);
  };

  // One write at each scheduled time (every 1000/rate ms); after a stall the missed ones catch up
  // at most four times the rate, and each record says how late it went out.
  const intervalMs = 1000 / rate;
  const perWakeup = Math.max(1, Math.ceil((4 * rate) / 1000));
  let scheduled = now();
  let stopped = false;
  let timer;
  const tick = () => {
    if (stopped) return;
    const at = now();
    for (let i = 0; i < perWakeup && scheduled <= at; i++) {
      write(scheduled);
      scheduled += intervalMs;
    }
    timer = setTimeout(tick, Math.max(0, scheduled - now()));
  };
  timer = setTimeout(tick, 0);

  process.once('message', async () => {
    stopped = true;
    clearTimeout(timer);
    await Promise.all([...pending]);
    agent.destroy();
    process.send({ records }, () => process.disconnect());
  });
}

if (process.send && process.argv[2]?.includes(marker)) {
  // It ends with its caller: a crashed bench leaves no writer behind.
  process.once('disconnect', () => process.exit(0));
  runWriter(JSON.parse(process.argv[2]));
}
