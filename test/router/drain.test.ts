import { describe, expect, it } from 'vitest';
import { routerClient, waitDrained } from '../../router/client.js';
import {
  environment,
  eventually,
  resourcesPerTest,
  routerWithRoute,
  send,
  slowRequestMs,
  startUpstream,
} from './support.js';

const resources = resourcesPerTest();

const key = `${environment}/web`;

describe('router: in-flight requests and drain', () => {
  it('lets a slow request begun on blue finish there after the switch, and waitDrained waits for it', async () => {
    const [blue, green] = await Promise.all([
      startUpstream(resources, 'blue'),
      startUpstream(resources, 'green'),
    ]);
    const { stateDir, listen, split } = await routerWithRoute(resources, {
      blue: [blue.address],
      green: [green.address],
      greenPercent: 0,
    });
    const client = routerClient(stateDir);

    const startedAt = Date.now();
    const slow = send(listen, { path: '/slow' });
    await eventually(async () => (await client.inFlight(key, [blue.address])) === 1);
    await split(100);
    await client.reload();

    // After the switch: new requests go to green, the slow one still counts on blue.
    expect(await send(listen)).toMatchObject({ status: 200, slot: 'green' });
    const { routes } = await client.routes();
    expect(routes[key]).toMatchObject({
      greenPercent: 100,
      inFlight: { blue: 1, green: 0, byAddress: { [blue.address]: 1 } },
    });
    expect(await waitDrained(stateDir, key, [blue.address], 100)).toEqual({ drained: false, inFlight: 1 });

    const drained = await waitDrained(stateDir, key, [blue.address], 10_000);
    const drainedAt = Date.now();
    expect(drained).toEqual({ drained: true, inFlight: 0 });
    expect(drainedAt - startedAt).toBeGreaterThanOrEqual(slowRequestMs - 50);
    expect(await slow).toMatchObject({ status: 200, body: 'blue', slot: 'blue' });
    expect(await client.inFlight(key, [blue.address, green.address])).toBe(0);
  });

  it('rejects waitDrained when its signal aborts, and counts no router as drained', async () => {
    const blue = await startUpstream(resources, 'blue');
    const { stateDir, listen, router } = await routerWithRoute(resources, {
      blue: [blue.address],
      green: [],
      greenPercent: 0,
    });

    const slow = send(listen, { path: '/slow?ms=500' });
    await eventually(() => router.inFlight(key, [blue.address]) === 1);
    const abort = new AbortController();
    const waiting = waitDrained(stateDir, key, [blue.address], 10_000, abort.signal);
    abort.abort(new Error('stop waiting'));
    await expect(waiting).rejects.toThrow('stop waiting');
    await slow;

    await router.close();
    expect(await waitDrained(stateDir, key, [blue.address], 1_000)).toEqual({ drained: true, inFlight: 0 });
  });
});
