import { readFileSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { describe, expect, it } from 'vitest';
import { routerClient } from '../../router/client.js';
import { type RoutingTable, routingTablePath } from '../../router/route-table.js';
import {
  eventually,
  freeListen,
  removeRoute,
  resourcesPerTest,
  routerWithRoute,
  send,
  setRoute,
  startTestRouter,
  startUpstream,
  stateDirFor,
} from './support.js';

const resources = resourcesPerTest();

const refused = async (listen: string): Promise<boolean> =>
  send(listen).then(
    () => false,
    (error: NodeJS.ErrnoException) => error.code === 'ECONNREFUSED',
  );

describe('router: listeners follow the table', () => {
  it('opens a listener for a new route, moves one whose listen changed, and closes a removed one', async () => {
    const stateDir = await stateDirFor(resources);
    const [a, b] = await Promise.all([startUpstream(resources, 'a'), startUpstream(resources, 'b')]);
    const [listenA, listenB, movedB] = [await freeListen(), await freeListen(), await freeListen()];
    await setRoute(stateDir, 'a', { listen: listenA, blue: [a.address], green: [], greenPercent: 0 });
    const { router, log } = await startTestRouter(resources, stateDir);
    expect(await refused(listenB)).toBe(true);

    await setRoute(stateDir, 'b', { listen: listenB, blue: [b.address], green: [], greenPercent: 0 });
    expect(await router.reload()).toMatchObject({ routes: 2, problems: [] });
    expect((await send(listenB)).body).toBe('b');
    expect((await send(listenA)).body).toBe('a');

    await setRoute(stateDir, 'b', { listen: movedB, blue: [b.address], green: [], greenPercent: 0 });
    await router.reload();
    expect((await send(movedB)).body).toBe('b');
    expect(await refused(listenB)).toBe(true);

    // A request in flight on a removed route finishes; the listener then takes no more, and lets
    // the keep-alive connection go at once rather than holding the router's close.
    const agent = new Agent({ keepAlive: true });
    resources.add(() => agent.destroy());
    const slow = send(listenA, { path: '/slow?ms=1000', agent });
    await eventually(() => router.routes().routes['test/a']?.inFlight.blue === 1);
    await removeRoute(stateDir, 'a');
    expect(await router.reload()).toMatchObject({ routes: 1 });
    expect(await refused(listenA)).toBe(true);
    expect(await slow).toMatchObject({ status: 200, body: 'a', headers: { connection: 'close' } });
    expect(log).toContain('router: test/a removed');
    const closeStartedAt = Date.now();
    await router.close();
    expect(Date.now() - closeStartedAt).toBeLessThan(1_000);
  });

  it('logs a commit as green promoted to the live slot, not as traffic back on blue', async () => {
    const [v1, v2] = await Promise.all([startUpstream(resources, 'v1'), startUpstream(resources, 'v2')]);
    const { stateDir, listen, router, log } = await routerWithRoute(resources, {
      blue: [v1.address],
      green: [v2.address],
      greenPercent: 100,
    });
    await setRoute(stateDir, 'web', { listen, blue: [v2.address], green: [], greenPercent: 0 });
    await router.reload();
    expect((await send(listen)).body).toBe('v2');
    expect(log.at(-1)).toBe(
      `router: test/web green promoted: it is the live slot now, on ${listen}: 100% blue [${v2.address}], 0% green []`,
    );
  });

  it('applies a table written on disc without being asked (file watch, poll fallback)', async () => {
    const stateDir = await stateDirFor(resources);
    const [blue, green] = await Promise.all([
      startUpstream(resources, 'blue'),
      startUpstream(resources, 'green'),
    ]);
    const listen = await freeListen();
    await startTestRouter(resources, stateDir);

    await setRoute(stateDir, 'web', {
      listen,
      blue: [blue.address],
      green: [green.address],
      greenPercent: 0,
    });
    await eventually(async () => (await send(listen).catch(() => null))?.body === 'blue', 3_000);
    await setRoute(stateDir, 'web', {
      listen,
      blue: [blue.address],
      green: [green.address],
      greenPercent: 100,
    });
    await eventually(async () => (await send(listen)).body === 'green', 3_000);
  });

  it('reports a listener it cannot open and keeps serving the other routes', async () => {
    const stateDir = await stateDirFor(resources);
    const [a, b] = await Promise.all([startUpstream(resources, 'a'), startUpstream(resources, 'b')]);
    const listenA = await freeListen();
    await setRoute(stateDir, 'a', { listen: listenA, blue: [a.address], green: [], greenPercent: 0 });
    // b asks for a's upstream port, which is taken.
    await setRoute(stateDir, 'b', { listen: a.address, blue: [b.address], green: [], greenPercent: 0 });
    const { router } = await startTestRouter(resources, stateDir);

    const result = await router.reload();
    expect(result.routes).toBe(2);
    expect(result.problems).toEqual([expect.stringMatching(`cannot listen on ${a.address} for test/b`)]);
    expect(result.unbound).toEqual([
      {
        routeKey: 'test/b',
        kind: 'main',
        address: a.address,
        cause:
          'the address is already in use (EADDRINUSE); stop the program listening there, or choose another port',
      },
    ]);
    expect((await send(listenA)).body).toBe('a');
  });

  it('keeps serving the last good table when the file is damaged, and says so', async () => {
    const blue = await startUpstream(resources, 'blue');
    const { stateDir, listen, log } = await routerWithRoute(resources, {
      blue: [blue.address],
      green: [],
      greenPercent: 0,
    });
    const table = JSON.parse(readFileSync(routingTablePath(stateDir), 'utf8')) as RoutingTable;
    const client = routerClient(stateDir);
    expect(await client.reload()).toEqual({
      version: table.routes['test/web']?.updatedAt,
      generation: 1,
      routes: 1,
      problems: [],
      unbound: [],
      holds: {},
    });

    writeFileSync(routingTablePath(stateDir), '{"version": 1, "rou');
    await expect(client.reload()).rejects.toMatchObject({ code: 'STATE_CORRUPT' });
    expect((await send(listen)).body).toBe('blue');
    await eventually(() => log.some((line) => line.startsWith('router: routing table not applied')), 3_000);
  });
});
