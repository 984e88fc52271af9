import { describe, expect, it } from 'vitest';
import { routerClient } from '../../router/client.js';
import {
  load,
  resourcesPerTest,
  routerWithRoute,
  send,
  startChildUpstream,
  startUpstream,
} from './support.js';

const resources = resourcesPerTest();

describe('router under load', () => {
  it('loses no request while the table flips blue → green → blue', async () => {
    const upstreams = await Promise.all(
      ['b1', 'b2', 'g1', 'g2'].map((name) => startUpstream(resources, name)),
    );
    const [b1, b2, g1, g2] = upstreams.map((u) => u.address) as [string, string, string, string];
    const { stateDir, listen, split } = await routerWithRoute(resources, {
      blue: [b1, b2],
      green: [g1, g2],
      greenPercent: 0,
    });
    const client = routerClient(stateDir);

    let done = false;
    let flips = 0;
    const misrouted: string[] = [];
    const flipper = (async () => {
      while (!done) {
        for (const percent of [100, 0]) {
          await split(percent);
          await client.reload();
          // Once reload answered, the switch is live: the very next request lands on the new slot.
          const answer = await send(listen);
          const expected = percent === 100 ? 'green' : 'blue';
          if (answer.slot !== expected) misrouted.push(`${percent}% → ${answer.slot}`);
          flips++;
        }
      }
    })();
    const result = await load(listen, 2_000, 16);
    done = true;
    await flipper;

    expect(result.errors).toEqual([]);
    expect(result.statuses).toEqual({ 200: 2_000 });
    expect(misrouted).toEqual([]);
    expect(flips).toBeGreaterThanOrEqual(4);
    for (const name of ['b1', 'b2', 'g1', 'g2']) expect(result.bodies[name]).toBeGreaterThan(0);
  });

  it('loses no request when a replica is killed with -9 under load', async () => {
    const [doomed, survivor] = await Promise.all([
      startChildUpstream(resources, 'doomed'),
      startChildUpstream(resources, 'survivor'),
    ]);
    const { listen } = await routerWithRoute(resources, {
      blue: [doomed.address, survivor.address],
      green: [],
      greenPercent: 0,
    });

    let killed = false;
    const result = await load(listen, 2_000, 16, (_answer, index) => {
      if (index >= 500 && !killed) {
        killed = true;
        void doomed.close();
      }
    });

    expect(result.errors).toEqual([]);
    expect(result.statuses).toEqual({ 200: 2_000 });
    expect(result.bodies.doomed).toBeGreaterThan(0);
    expect(result.bodies.survivor).toBeGreaterThan(1_000);
  });
});
