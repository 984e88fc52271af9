/**
 * The fixed-rate load generator behind the demo, the zero-failure tests and `npm run bench`
 * (bench/load.js), against a real server on loopback: it must send at the rate asked, one request
 * at a time rather than in batches (a batch queues at a single-process upstream and reads as the
 * server's latency), and say how late it sent them.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { startLoad } from '../bench/load.js';

let server: Server | null = null;
afterEach(async () => {
  server?.closeAllConnections();
  server?.close();
  server = null;
});

async function versionServer(version: string, delayMs = 0): Promise<string> {
  server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    setTimeout(() => res.end(JSON.stringify({ version })), delayMs);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

describe('bench/load.js', () => {
  it.each([
    ['a worker thread', false],
    ['a process of its own', true],
  ])(
    'sends at the rate asked, one request at a time, and records who answered and how late each was sent (from %s)',
    async (_, ownProcess) => {
      const url = await versionServer('9.9.9');
      const rate = 200;
      const load = startLoad({ url, rate, ownProcess });
      await sleep(1_500);
      if (ownProcess) {
        // Its own session (so its own scheduling group), and gone once stopped.
        expect(load.pid).not.toBe(process.pid);
        const stat = readFileSync(`/proc/${load.pid}/stat`, 'utf8');
        const session = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
        expect(session).toBe(load.pid);
      }
      const result = await load.stop();
      if (ownProcess) expect(() => process.kill(load.pid, 0)).toThrow(/ESRCH/);

      expect(result.failed).toBe(0);
      expect(result.versions).toEqual({ '9.9.9': result.requests });
      // At the rate asked over the generator's own life, from its start to its stop: a process of
      // its own starts later than the test's clock says (215 requests in this test's 1.5 s beside a
      // CPU hog, ci74; the generator had 1.1 s of it), and then sends every request due.
      expect(result.requests).toBeGreaterThan(50);
      expect(result.rate).toBeGreaterThan(170);
      expect(result.rate).toBeLessThan(215);
      // Spaced out, not in batches: at 200/s requests are due 5 ms apart, and even a send that
      // catches up after a stall goes out on a wakeup of its own (the old 10 ms tick sent two at
      // once). Told by the wakeup that sent each, not by the gap in time: on a loaded machine two
      // wakeups can come well under a millisecond apart.
      const wakeups = result.records.map((r) => r.wakeup ?? 0);
      expect(wakeups.every((w) => Number.isInteger(w) && w > 0)).toBe(true);
      expect(new Set(wakeups).size).toBe(wakeups.length);
      for (const record of result.records) expect(record.lateMs).toBeGreaterThanOrEqual(0);
      expect(result.lateMax).toBeGreaterThanOrEqual(result.lateP99);
      expect(Number.isFinite(result.lateP99)).toBe(true);
    },
  );

  it('sends no request past maxInFlight (recorded as saturated, failed) unless allowed more: then every request due is sent and answered', async () => {
    // Answers after 300 ms: at 200/s about 60 requests wait for theirs at once.
    const url = await versionServer('9.9.9', 300);
    const bounded = startLoad({ url, rate: 200, maxInFlight: 20 });
    await sleep(1_000);
    const few = await bounded.stop();
    expect(few.failures.map((r) => r.error)).toContain('load generator saturated');
    expect(few.records.filter((r) => r.status === 200).length).toBeLessThan(few.requests);

    const unbounded = startLoad({ url, rate: 200, maxInFlight: 100_000 });
    await sleep(1_000);
    const all = await unbounded.stop();
    expect(all.failed).toBe(0);
    // 200 are due in the second, about 60 of them waiting for answers at once: over 100 sent shows
    // the generator went on sending past the 20 in flight (115 beside a benchmark, ci55; no failure
    // above says none was refused as saturated).
    expect(all.requests).toBeGreaterThan(100);
    expect(all.versions).toEqual({ '9.9.9': all.requests });
  });
});
