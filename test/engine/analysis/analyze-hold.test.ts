/**
 * analyzeHold, the `analyze` command's executor, as a unit: a scripted reader of cumulative
 * counters stands for the router (measureWindow against the real router is measure-window.test.ts,
 * the whole flow under load test/cutover/progressive.test.ts). A Prometheus-only analysis queries a
 * loopback HTTP server answering the instant-query API at the window's end.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { AnalysisSettings } from '../../../core/analysis/analysis-settings.js';
import { emptySlotTraffic, type RouteTraffic } from '../../../core/analysis/traffic.js';
import type { Command } from '../../../core/migration/types.js';
import { analyzeHold } from '../../../engine/analysis/analyze-hold.js';

const settings: AnalysisSettings = { checks: { minRequests: 50, successRate: { min: 99 } }, prometheus: [] };

const command = (analysis: AnalysisSettings, ms = 300): Extract<Command, { kind: 'analyze' }> => ({
  id: 'c1',
  kind: 'analyze',
  weight: 10,
  ms,
  routes: [{ route: 'www', analysis }],
});

/** Cumulative counters that grow by `perRead` green requests (and `errorsPerRead` 5xx) at each read. */
function counters(perRead: number, errorsPerRead = 0) {
  let reads = 0;
  return async (): Promise<RouteTraffic> => {
    const green = emptySlotTraffic();
    green.requests = perRead * reads;
    green.errors5xx = errorsPerRead * reads;
    green.buckets = green.buckets.map(() => green.requests);
    reads += 1;
    return { route: 'env/www', startedAt: 1, at: Date.now(), slots: { green, blue: emptySlotTraffic() } };
  };
}

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

describe('analyzeHold', () => {
  it('extends an inconclusive hold once and judges both windows together', async () => {
    const lines: string[] = [];
    // Too few in the first window (under 50), enough over both.
    const read = counters(20, 0);
    const result = await analyzeHold(
      command(settings),
      () => ({ traffic: read, driver: 'built-in router' }),
      new AbortController().signal,
      (line) => lines.push(line),
    );
    expect(lines.join('\n')).toMatch(/fewer than the 50 needed.*the hold is extended once, by 300ms/);
    expect(result.outcome).toBe('pass');
    expect(result.routes[0]?.green?.requests).toBeGreaterThanOrEqual(50);
  });

  it('still too little traffic after the extension: inconclusive (the step passes with a warning)', async () => {
    const result = await analyzeHold(
      command(settings),
      () => ({ traffic: counters(1), driver: 'built-in router' }),
      new AbortController().signal,
      () => undefined,
    );
    expect(result.outcome).toBe('inconclusive');
    expect(result.reason).toMatch(
      /^green had \d+ requests?, fewer than the 50 needed to judge it at the 10 % step$/,
    );
  });

  it('refuses built-in checks on a driver that cannot measure traffic, naming the route and the way out', async () => {
    const run = analyzeHold(
      command(settings),
      () => ({ traffic: null, driver: 'driver edge' }),
      new AbortController().signal,
      () => undefined,
    );
    await expect(run).rejects.toThrow(
      /^route www: its driver edge cannot measure traffic per slot; use prometheus checks in its analysis/,
    );
  });

  it('judges Prometheus checks at the window end: a value over max is a breach with its figures', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          status: 'success',
          data: { resultType: 'vector', result: [{ metric: {}, value: [0, '0.2'] }] },
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => server.close());
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const started = Date.now();
    const result = await analyzeHold(
      command({ checks: { minRequests: 50 }, prometheus: [{ url, query: 'error_ratio', max: 0.05 }] }, 200),
      () => ({ traffic: null, driver: 'driver edge' }),
      new AbortController().signal,
      () => undefined,
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(200);
    expect(result.outcome).toBe('breach');
    expect(result.reason).toMatch(/error_ratio.*0\.2.*0\.05/);
  });

  it('Prometheus alone: NaN (no traffic) extends the hold once, and the queries are judged again', async () => {
    // Answers NaN, then each value in turn; the count of queries asked is the test's evidence.
    const scripted = async (values: string[]) => {
      let asked = 0;
      const server = createServer((_req, res) => {
        const value = values[Math.min(asked, values.length - 1)] as string;
        asked += 1;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            status: 'success',
            data: { resultType: 'vector', result: [{ metric: {}, value: [0, value] }] },
          }),
        );
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      closers.push(() => server.close());
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const lines: string[] = [];
      const result = await analyzeHold(
        command({ checks: { minRequests: 50 }, prometheus: [{ url, query: 'error_ratio', max: 0.05 }] }, 200),
        () => ({ traffic: null, driver: 'driver edge' }),
        new AbortController().signal,
        (line) => lines.push(line),
      );
      return { result, lines, asked: () => asked };
    };
    const late = await scripted(['NaN', '0.2']);
    expect(late.lines.join('\n')).toMatch(
      /^route www: the query `error_ratio` gave NaN .*; the hold is extended once, by 200ms$/,
    );
    expect(late.result).toMatchObject({ outcome: 'breach' });
    expect(late.result.reason).toMatch(/^prometheus `error_ratio` = 0\.2 > max 0\.05$/);
    expect(late.asked()).toBe(2);
    // Bounded: still NaN after the extension is inconclusive (the step passes with a warning).
    const never = await scripted(['NaN']);
    expect(never.result.outcome).toBe('inconclusive');
    expect(never.asked()).toBe(2);
  });
});

describe('analyzeHold with routes shifted together', () => {
  const twoRoutes = (ms: number): Extract<Command, { kind: 'analyze' }> => ({
    id: 'c2',
    kind: 'analyze',
    weight: 10,
    ms,
    routes: [
      { route: 'a', analysis: settings },
      { route: 'b', analysis: settings },
    ],
  });

  it("a breach on one route ends the analysis at once, without waiting for the other route's hold", async () => {
    const holdMs = 6_000;
    const started = Date.now();
    // Route a fails every request (a clear breach at its first look, ~1.2 s in); b is healthy.
    const result = await analyzeHold(
      twoRoutes(holdMs),
      (route) => ({ traffic: route === 'a' ? counters(100, 100) : counters(100), driver: 'built-in router' }),
      new AbortController().signal,
      () => undefined,
    );
    const tookMs = Date.now() - started;
    expect(result.outcome).toBe('breach');
    expect(result.reason).toMatch(/^route a: /);
    // Before the fix it waited for b's whole hold (6 s); the breach shows at a's first look.
    expect(tookMs).toBeLessThan(holdMs / 2);
  });

  it("a route whose reader fails stops the other routes' windows before the error is the command's", async () => {
    // b's window waits on a timer between looks; the analysis must end it before rejecting (before
    // the fix b's loop ran on beside the command's retry, reading until its hold ended).
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const before = timers();
    const run = analyzeHold(
      twoRoutes(6_000),
      (route) => ({
        traffic:
          route === 'a'
            ? async () => {
                throw new Error('router 127.0.0.1:1 refused the connection');
              }
            : counters(100),
        driver: 'built-in router',
      }),
      new AbortController().signal,
      () => undefined,
    );
    await expect(run).rejects.toThrow(/refused the connection/);
    expect(timers()).toBe(before);
  });
});
