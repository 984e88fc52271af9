/**
 * Analysis against a real router and a real Prometheus scraping its /metrics every second: the
 * built-in verdict on a measured window and the Prometheus check on the same traffic decide alike,
 * for a green failing 5 % of its requests and for a healthy one. One router, one Prometheus.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quantileMs } from '../../../core/analysis/traffic.js';
import type { AnalysisChecks } from '../../../core/analysis/verdict.js';
import {
  judgeMeasurement,
  measureWindow,
  type TrafficReader,
} from '../../../engine/analysis/measure-window.js';
import { runPrometheusCheck } from '../../../engine/analysis/prometheus.js';
import { routerClient } from '../../../router/client.js';
import {
  environment,
  eventually,
  freeListen,
  freePort,
  load,
  setRoute,
  startTestRouter,
  startUpstream,
  stateDirFor,
} from '../../router/support.js';
import { startPrometheus, type TestPrometheus } from '../../support/prometheus.js';
import { Resources } from '../../support/resources.js';

const resources = new Resources();
afterAll(() => resources.cleanup());

/** The issue's checks: at most 1 % 5xx, judged on at least 50 green requests. */
const checks: AnalysisChecks = { minRequests: 50, successRate: { min: 99 } };
/** The same bound as a Prometheus check: green's 5xx ratio over the window, at most 0.01. */
const errorRatio = (route: string) =>
  `sum(increase(cutover_route_responses_5xx_total{route="${route}",slot="green"}[1m])) / sum(increase(cutover_route_requests_total{route="${route}",slot="green"}[1m]))`;

let stateDir: string;
let prometheus: TestPrometheus;
const listens: Record<string, string> = {};

beforeAll(async () => {
  stateDir = await stateDirFor(resources);
  const blue = await startUpstream(resources, 'blue');
  const greens = {
    failing: await startUpstream(resources, 'green', { failOneIn: 20 }), // 5 %
    healthy: await startUpstream(resources, 'green'),
  };
  for (const [route, green] of Object.entries(greens)) {
    listens[route] = await freeListen();
    await setRoute(stateDir, route, {
      listen: listens[route] as string,
      blue: [blue.address],
      green: [green.address],
      greenPercent: 50,
    });
  }
  const { router } = await startTestRouter(resources, stateDir);
  prometheus = await startPrometheus(resources, `127.0.0.1:${router.controlPort}`);
}, 60_000);

/** Measures a window of `route` while 300 requests go through it, then lets Prometheus scrape its end. */
async function measure(route: string) {
  const client = routerClient(stateDir);
  let started: () => void = () => undefined;
  const windowStarted = new Promise<void>((resolve) => (started = resolve));
  const read: TrafficReader = async () => {
    const traffic = await client.traffic(`${environment}/${route}`);
    started();
    return traffic;
  };
  // Prometheus has the route's series (at zero) before any of its traffic.
  await eventually(
    async () => (await prometheus.query(`cutover_route_requests_total{route="${route}",slot="green"}`)) === 0,
    20_000,
  );
  const window = measureWindow(read, 2_500, new AbortController().signal);
  await windowStarted;
  const sent = await load(listens[route] as string, 300, 6);
  expect(sent.errors).toEqual([]);
  const measurement = await window;
  // Prometheus has scraped at least what the window saw.
  await eventually(
    async () =>
      ((await prometheus.query(`cutover_route_requests_total{route="${route}",slot="green"}`)) ?? 0) >=
      measurement.green.requests,
    20_000,
  );
  return measurement;
}

describe('analysis: the built-in verdict and a real Prometheus decide alike', () => {
  it('a green failing 5 % of requests: both breach, and the reason gives the rate', async () => {
    const measurement = await measure('failing');
    const verdict = judgeMeasurement(measurement, checks, 50);
    expect(verdict.outcome).toBe('breach');
    expect(verdict.reason).toMatch(/^green 5xx [45](\.\d)? % > 1 % over \d+ requests at the 50 % step$/);

    const check = await runPrometheusCheck({ url: prometheus.url, query: errorRatio('failing'), max: 0.01 });
    expect(check.outcome).toBe('breach');
    expect(check.value).toBeGreaterThan(0.03);
    expect(check.value).toBeLessThan(0.07);
    expect(check.reason).toMatch(/^prometheus `sum\(increase.*` = 0\.0\d+ > max 0\.01$/);
  }, 60_000);

  it('a healthy green: both pass', async () => {
    const measurement = await measure('healthy');
    const verdict = judgeMeasurement(measurement, checks, 50);
    expect(verdict.outcome).toBe('pass');
    expect(verdict.reason).toMatch(/^green 5xx 0 % ≤ 1 % over \d+ requests at the 50 % step$/);

    const check = await runPrometheusCheck({ url: prometheus.url, query: errorRatio('healthy'), max: 0.01 });
    expect(check).toMatchObject({ outcome: 'pass', value: 0 });

    // The router's p99 reads as Prometheus's histogram_quantile reads the same buckets.
    const all = await routerClient(stateDir).traffic(`${environment}/healthy`);
    const series = `{route="healthy",slot="green"}`;
    await eventually(
      async () =>
        (await prometheus.query(`cutover_route_requests_total${series}`)) === all.slots.green.requests,
      20_000,
    );
    const p99 = await prometheus.query(
      `histogram_quantile(0.99, sum by (le) (cutover_route_request_duration_seconds_bucket${series}))`,
    );
    expect(p99).toBeGreaterThan(0);
    expect((p99 ?? Number.NaN) * 1000).toBeCloseTo(quantileMs(all.slots.green, 0.99) ?? Number.NaN, 6);
  }, 60_000);

  it('a check that cannot be evaluated fails, in one line with the cause and what to do', async () => {
    const down = await runPrometheusCheck({
      url: `http://127.0.0.1:${await freePort()}`,
      query: 'up',
      min: 1,
    });
    expect(down).toMatchObject({ outcome: 'breach', failed: true, value: null });
    expect(down.reason).toMatch(
      /^prometheus check failed: cannot reach Prometheus at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\): start Prometheus there, or fix the check's url$/,
    );
    const bad = await runPrometheusCheck({ url: prometheus.url, query: 'sum(', max: 1 });
    expect(bad).toMatchObject({ outcome: 'breach', failed: true });
    expect(bad.reason).toMatch(
      /^prometheus check failed: Prometheus at .* refused the query `sum\(` \(HTTP 400, bad_data\): .*; fix the query/,
    );
    const empty = await runPrometheusCheck({
      url: prometheus.url,
      query: 'cutover_route_requests_total{route="nope"}',
      max: 1,
    });
    expect(empty).toMatchObject({ outcome: 'breach', failed: true });
    expect(empty.reason).toContain('selected no sample');
    // A range shorter than two scrapes (here 1 s) holds at most one sample: increase() gives nothing.
    const short = await runPrometheusCheck({
      url: prometheus.url,
      query: 'sum(increase(cutover_route_requests_total[500ms]))',
      max: 1,
    });
    expect(short).toMatchObject({ outcome: 'breach', failed: true });
    expect(short.reason).toMatch(
      /selected no sample .*: its range \[500ms\] may hold fewer than two scrapes; make it at least twice Prometheus's scrape interval/,
    );
    for (const answer of [down, bad, empty, short]) expect(answer.reason).not.toContain('\n');
  });
});
