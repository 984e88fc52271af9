/**
 * The router's per-slot traffic metrics, through a real router on loopback: what Prometheus
 * scrapes from `GET /metrics` (no token) and what the engine reads as JSON (`traffic`).
 */
import { describe, expect, it } from 'vitest';
import { quantileMs } from '../../core/analysis/traffic.js';
import { routerClient } from '../../router/client.js';
import {
  environment,
  eventually,
  freeListen,
  freePort,
  load,
  resourcesPerTest,
  routerWithRoute,
  startUpstream,
} from './support.js';

const resources = resourcesPerTest();
const key = `${environment}/web`;

async function get(port: number | null, path: string, token?: string) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
}

/** The value of one series of the exposition, e.g. `cutover_route_requests_total{…slot="green"}`. */
function sample(text: string, name: string, labels: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  if (!line) throw new Error(`no ${name}{${labels}} in:\n${text}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

const labels = (slot: string) => `environment="${environment}",route="web",slot="${slot}"`;

describe('router: per-slot metrics', () => {
  it('counts requests and 5xx per slot, and serves them to Prometheus without a token', async () => {
    const blue = await startUpstream(resources, 'blue');
    const green = await startUpstream(resources, 'green', { failOneIn: 5 });
    const { router, listen } = await routerWithRoute(resources, {
      blue: [blue.address],
      green: [green.address],
      greenPercent: 50,
    });
    const result = await load(listen, 200, 4);
    expect(result.statuses).toEqual({ 200: 180, 500: 20 });

    const metrics = () => get(router.controlPort, '/metrics');
    await eventually(
      async () => sample((await metrics()).text, 'cutover_route_requests_total', labels('green')) === 100,
    );
    const { status, type, text } = await metrics();
    expect(status).toBe(200);
    expect(type).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(sample(text, 'cutover_route_requests_total', labels('blue'))).toBe(100);
    expect(sample(text, 'cutover_route_responses_5xx_total', labels('blue'))).toBe(0);
    expect(sample(text, 'cutover_route_responses_5xx_total', labels('green'))).toBe(20);
    const histogram = 'cutover_route_request_duration_seconds';
    expect(text).toContain(`# TYPE ${histogram} histogram`);
    expect(sample(text, `${histogram}_bucket`, `${labels('green')},le="+Inf"`)).toBe(100);
    expect(sample(text, `${histogram}_count`, labels('green'))).toBe(100);
    expect(sample(text, `${histogram}_bucket`, `${labels('green')},le="0.5"`)).toBe(100);

    // The same counters as JSON for the engine, behind the control token.
    expect((await get(router.controlPort, `/traffic?route=${encodeURIComponent(key)}`)).status).toBe(401);
    const traffic = await routerClient(router.stateDir).traffic(key);
    expect(traffic.slots.green).toMatchObject({ requests: 100, errors5xx: 20 });
    expect(traffic.slots.blue).toMatchObject({ requests: 100, errors5xx: 0 });
  });

  it("counts the router's own 502 for a green that does not answer as green's 5xx", async () => {
    const blue = await startUpstream(resources, 'blue');
    const deadGreen = `127.0.0.1:${await freePort()}`;
    const { router, listen } = await routerWithRoute(resources, {
      blue: [blue.address],
      green: [deadGreen],
      greenPercent: 100,
    });
    const result = await load(listen, 20, 2);
    expect(result.statuses).toEqual({ 502: 20 });
    const client = routerClient(router.stateDir);
    await eventually(async () => (await client.traffic(key)).slots.green.requests === 20);
    const traffic = await client.traffic(key);
    expect(traffic.slots.green.errors5xx).toBe(20);
    expect(traffic.slots.blue.requests).toBe(0);
  });

  it("measures each slot's latency: a green 150 ms slower shows in its p99, not in blue's", async () => {
    const blue = await startUpstream(resources, 'blue');
    const green = await startUpstream(resources, 'green', { delayMs: 150 });
    const { router, listen } = await routerWithRoute(resources, {
      blue: [blue.address],
      green: [green.address],
      greenPercent: 50,
    });
    await load(listen, 60, 6);
    const client = routerClient(router.stateDir);
    await eventually(async () => (await client.traffic(key)).slots.green.requests === 30);
    const { slots } = await client.traffic(key);
    expect(quantileMs(slots.green, 0.99)).toBeGreaterThanOrEqual(150);
    expect(quantileMs(slots.green, 0.99)).toBeLessThanOrEqual(300);
    // Blue answers at once: well under green's, even on a loaded machine.
    expect(quantileMs(slots.blue, 0.99)).toBeLessThan(100);
    expect(slots.green.durationSumMs / slots.green.requests).toBeGreaterThanOrEqual(150);
  });
});

describe('router: per-slot metrics leave the preview listener out', () => {
  it("does not count the gate's requests to the preview listener in green's traffic", async () => {
    const blue = await startUpstream(resources, 'blue');
    const green = await startUpstream(resources, 'green', { failOneIn: 1 });
    const preview = await freeListen();
    const { router, listen } = await routerWithRoute(resources, {
      blue: [blue.address],
      green: [green.address],
      greenPercent: 0,
      preview,
    });
    expect((await load(preview, 10, 1)).statuses).toEqual({ 500: 10 });
    expect((await load(listen, 10, 1)).statuses).toEqual({ 200: 10 });
    const client = routerClient(router.stateDir);
    await eventually(async () => (await client.traffic(key)).slots.blue.requests === 10);
    expect((await client.traffic(key)).slots.green).toMatchObject({ requests: 0, errors5xx: 0 });
  });
});
