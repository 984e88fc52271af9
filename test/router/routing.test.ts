import { createServer, type RequestListener } from 'node:http';
import { describe, expect, it } from 'vitest';
import { buildRoutingState, chooseSlot, emptyRoutingState } from '../../router/routing-state.js';
import {
  environment,
  freeListen,
  resourcesPerTest,
  routerWithRoute,
  send,
  setRoute,
  startTestRouter,
  startUpstream,
  stateDirFor,
} from './support.js';

const resources = resourcesPerTest();

const key = `${environment}/web`;

describe('router: where requests go', () => {
  it('at 10% green sends exactly 10 of 100 requests to green, spread evenly', async () => {
    const [b1, b2, g1] = await Promise.all([
      startUpstream(resources, 'b1'),
      startUpstream(resources, 'b2'),
      startUpstream(resources, 'g1'),
    ]);
    const { listen } = await routerWithRoute(resources, {
      blue: [b1.address, b2.address],
      green: [g1.address],
      greenPercent: 10,
    });

    const answers = [];
    for (let i = 0; i < 100; i++) answers.push(await send(listen));
    const bodies = answers.map((a) => a.body);
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(bodies.filter((b) => b === 'g1')).toHaveLength(10);
    expect(bodies.filter((b) => b === 'b1')).toHaveLength(45);
    expect(bodies.filter((b) => b === 'b2')).toHaveLength(45);
    // One green in every window of ten, not ten in a row.
    for (let i = 0; i < 100; i += 10)
      expect(bodies.slice(i, i + 10).filter((b) => b === 'g1')).toHaveLength(1);
    expect(answers.map((a) => a.slot)).toEqual(bodies.map((b) => (b === 'g1' ? 'green' : 'blue')));
  });

  it('splits by smooth weighted round robin for any percentage', () => {
    for (const percent of [0, 1, 25, 33, 50, 90, 99, 100]) {
      const table = {
        version: 1,
        routes: {
          [key]: {
            listen: '127.0.0.1:1',
            blue: ['127.0.0.1:2'],
            green: ['127.0.0.1:3'],
            greenPercent: percent,
          },
        },
      };
      const route = buildRoutingState(table, emptyRoutingState).routes.get(key);
      if (!route) throw new Error('route not built');
      const picks = Array.from({ length: 100 }, () => chooseSlot(route, 'main'));
      expect(picks.filter((slot) => slot === 'green')).toHaveLength(percent);
    }
  });

  it('passes method, path, body and x-forwarded-for, and names the slot in x-cutover-slot', async () => {
    const blue = await startUpstream(resources, 'blue-1');
    const { listen } = await routerWithRoute(resources, { blue: [blue.address], green: [], greenPercent: 0 });

    const answer = await send(listen, { method: 'POST', path: '/orders?x=1', body: 'a'.repeat(100_000) });
    expect(answer.status).toBe(200);
    expect(answer.body).toBe(`blue-1:${'a'.repeat(100_000)}`);
    expect(answer.slot).toBe('blue');
    expect(answer.headers['x-seen-forwarded-for']).toBe('127.0.0.1');
  });

  it('sends everything on the preview listener to green, and to blue while there is no green', async () => {
    const stateDir = await stateDirFor(resources);
    const [blue, green] = await Promise.all([
      startUpstream(resources, 'blue'),
      startUpstream(resources, 'green'),
    ]);
    const [listen, preview] = [await freeListen(), await freeListen()];
    await setRoute(stateDir, 'web', { listen, preview, blue: [blue.address], green: [], greenPercent: 0 });
    const { router } = await startTestRouter(resources, stateDir);
    expect((await send(preview)).body).toBe('blue');

    await setRoute(stateDir, 'web', {
      listen,
      preview,
      blue: [blue.address],
      green: [green.address],
      greenPercent: 0,
    });
    await router.reload();
    for (let i = 0; i < 5; i++) {
      expect(await send(preview)).toMatchObject({ status: 200, body: 'green', slot: 'green' });
      expect(await send(listen)).toMatchObject({ status: 200, body: 'blue', slot: 'blue' });
    }
  });

  it('answers 503 with a short text on a route without addresses', async () => {
    const { listen } = await routerWithRoute(resources, { blue: [], green: [], greenPercent: 0 });

    const answer = await send(listen);
    expect(answer.status).toBe(503);
    expect(answer.body).toBe(`cutover: route ${key} has no upstream address\n`);
  });
});

describe('router: upstreams that fail', () => {
  it('resends a request, body of any size included, to another replica when one refuses the connection', async () => {
    const [dead, alive] = await Promise.all([
      startUpstream(resources, 'dead'),
      startUpstream(resources, 'alive'),
    ]);
    await dead.close();
    const { listen } = await routerWithRoute(resources, {
      blue: [dead.address, alive.address],
      green: [],
      greenPercent: 0,
    });

    for (let i = 0; i < 10; i++) {
      const body = `order ${i} `.repeat(i * 50_000); // up to 4.5 MB: beyond what is kept for replay
      expect(await send(listen, { method: 'POST', body })).toMatchObject({
        status: 200,
        body: `alive:${body}`,
      });
    }
  });

  it('fails over to the other slot when it takes a share of the traffic', async () => {
    const [dead, green] = await Promise.all([
      startUpstream(resources, 'dead'),
      startUpstream(resources, 'green'),
    ]);
    await dead.close();
    const { listen } = await routerWithRoute(resources, {
      blue: [dead.address],
      green: [green.address],
      greenPercent: 50,
    });

    for (let i = 0; i < 10; i++) expect(await send(listen)).toMatchObject({ status: 200, slot: 'green' });
  });

  it('answers 502 when every upstream it may use refuses, and never sends traffic to a slot at 0%', async () => {
    const [dead, green] = await Promise.all([
      startUpstream(resources, 'dead'),
      startUpstream(resources, 'green'),
    ]);
    await dead.close();
    const { listen } = await routerWithRoute(resources, {
      blue: [dead.address],
      green: [green.address],
      greenPercent: 0,
    });

    const answer = await send(listen);
    expect(answer.status).toBe(502);
    expect(answer.body).toMatch(
      new RegExp(`^cutover: no upstream of route ${key} answered \\(${dead.address}\\)`),
    );
  });

  it('resends an idempotent request the upstream reset before answering, but never a POST', async () => {
    const crashing = await rawUpstream((req) => req.socket.destroy());
    const alive = await startUpstream(resources, 'alive');
    const { listen } = await routerWithRoute(resources, {
      blue: [crashing.address, alive.address],
      green: [],
      greenPercent: 0,
    });

    const gets = [];
    for (let i = 0; i < 4; i++) gets.push(await send(listen));
    expect(gets.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    const posts = [];
    for (let i = 0; i < 4; i++) posts.push((await send(listen, { method: 'POST', body: 'pay' })).status);
    // Round robin: every other POST is sent to the crashing replica, which may have acted on it.
    expect(posts).toEqual([502, 200, 502, 200]);
    expect(crashing.hits()).toBe(6);
  });

  it('cuts the client off when the upstream dies mid-answer, without resending the request', async () => {
    const cutting = await rawUpstream((_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial', () => res.socket?.destroy());
    });
    const other = await startUpstream(resources, 'other');
    const { listen } = await routerWithRoute(resources, {
      blue: [cutting.address, other.address],
      green: [],
      greenPercent: 0,
    });

    await expect(send(listen)).rejects.toThrow();
    expect(cutting.hits()).toBe(1);
    expect((await send(listen)).body).toBe('other');
  });
});

/** An upstream with a handler of the test's own, counting the requests it received. */
async function rawUpstream(handler: RequestListener): Promise<{ address: string; hits(): number }> {
  let hits = 0;
  const server = createServer((req, res) => {
    hits++;
    handler(req, res);
  });
  return { address: await resources.listen(server), hits: () => hits };
}
