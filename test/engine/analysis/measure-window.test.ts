/**
 * measureWindow against a real router on loopback: the window's traffic is what happened in it,
 * a clear breach ends it early, a slow green shows against blue, a router restarted meanwhile is
 * noticed, and an abort stops it.
 */
import { describe, expect, it } from 'vitest';
import type { AnalysisChecks } from '../../../core/analysis/verdict.js';
import {
  judgeMeasurement,
  measureWindow,
  type TrafficReader,
} from '../../../engine/analysis/measure-window.js';
import { routerClient } from '../../../router/client.js';
import {
  environment,
  load,
  resourcesPerTest,
  routerWithRoute,
  startTestRouter,
  startUpstream,
  type UpstreamBehaviour,
} from '../../router/support.js';

const resources = resourcesPerTest();
const key = `${environment}/web`;

/** A router with route `web` split 50/50 between a plain blue and a green that behaves as told. */
async function route(green: UpstreamBehaviour) {
  const blue = await startUpstream(resources, 'blue');
  const greenUpstream = await startUpstream(resources, 'green', green);
  const routed = await routerWithRoute(resources, {
    blue: [blue.address],
    green: [greenUpstream.address],
    greenPercent: 50,
  });
  let first: () => void = () => undefined;
  const started = new Promise<void>((resolve) => (first = resolve));
  const read: TrafficReader = async () => {
    const traffic = await routerClient(routed.stateDir).traffic(key);
    first();
    return traffic;
  };
  return { ...routed, read, started };
}

describe('measureWindow', () => {
  it('ends a window early at the first look that breaches, long before its end', async () => {
    const { listen, read, started } = await route({ failOneIn: 2 });
    const checks: AnalysisChecks = { minRequests: 20, successRate: { min: 99 } };
    // A 10-minute window: only ending early lets this test finish.
    const window = measureWindow(read, 600_000, new AbortController().signal, {
      checks,
      weight: 50,
      sampleIntervalMs: 200,
    });
    await started;
    const [measurement] = await Promise.all([window, load(listen, 300, 4)]);
    expect(measurement.endedEarly?.outcome).toBe('breach');
    // Over the minimum of requests, the rate; or, when the first look came before the minimum
    // (a slow machine: ci56 looked at 16 of 20), the failures that already prove the breach.
    expect(judgeMeasurement(measurement, checks, 50).reason).toMatch(
      /^green 5xx ((4\d|50)(\.\d)? % > 1 % over \d+ requests|on \d+ requests, more than the \d+ that successRate\.min 99 % allows of \d+ over \d+ requests) at the 50 % step/,
    );
  }, 30_000);

  // Green's p99 is 200 ms and more (480 ms on a loaded machine): the breach is the ratio to blue.
  it('measures only the window: a green slow by 200 ms breaches a comparison with blue', async () => {
    const { listen, read, started } = await route({ delayMs: 200 });
    await load(listen, 20, 4); // before the window: not counted in it
    // Long enough for the load below (about 1 s: 5 rounds of green's 200 ms) on a loaded machine.
    const window = measureWindow(read, 3_000, new AbortController().signal);
    await started;
    await load(listen, 60, 12);
    const measurement = await window;
    expect(measurement.endedEarly).toBeNull();
    expect(measurement.routerRestarted).toBe(false);
    expect(measurement.green.requests + measurement.blue.requests).toBe(60);
    const verdict = judgeMeasurement(
      measurement,
      { minRequests: 25, compareWithBlue: { p99: { maxRatio: 2 } } },
      50,
    );
    expect(verdict.outcome).toBe('breach');
    expect(verdict.reason).toMatch(
      /^green p99 ([2-9]\d\d|\d{4,}) ms is \d+(\.\d)?× blue's .* ms \(more than 2×\) over 30 requests at the 50 % step$/,
    );
  }, 30_000);

  it('notices a router restarted during the window and counts only what came after', async () => {
    const { listen, read, started, router, stateDir } = await route({});
    const window = measureWindow(read, 2_500, new AbortController().signal);
    await started;
    await load(listen, 30, 3);
    await router.close();
    await startTestRouter(resources, stateDir);
    await load(listen, 10, 2);
    const measurement = await window;
    expect(measurement.routerRestarted).toBe(true);
    expect(measurement.green.requests + measurement.blue.requests).toBe(10);
  }, 30_000);

  it('stops when its signal aborts', async () => {
    const { read, started } = await route({});
    const abort = new AbortController();
    const window = measureWindow(read, 600_000, abort.signal);
    await started;
    abort.abort();
    await expect(window).rejects.toMatchObject({ name: 'AbortError' });
  });
});
