/**
 * The router as `cutover proxy` runs it: a process of its own, from the compiled dist/ (run
 * `npm run build` first; `npm test` does). Killed with -9, the next router serves the same routes,
 * because the table on disc is its only state.
 */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { routerClient, waitDrained } from '../../router/client.js';
import { liveRouterRecord, readRouterRecord } from '../../router/router-record.js';
import {
  compiledRouter,
  environment,
  freeListen,
  killChild,
  resourcesPerTest,
  send,
  setRoute,
  startChildRouter,
  startUpstream,
  stateDirFor,
} from './support.js';

const resources = resourcesPerTest();

const key = `${environment}/web`;

describe('router process', () => {
  it('comes back with the same routing after kill -9', async () => {
    if (!existsSync(compiledRouter))
      throw new Error(`${compiledRouter} is missing: run \`npm run build\` first`);
    const stateDir = await stateDirFor(resources);
    const [blue, green] = await Promise.all([
      startUpstream(resources, 'blue'),
      startUpstream(resources, 'green'),
    ]);
    const [listen, preview] = [await freeListen(), await freeListen()];
    await setRoute(stateDir, 'web', {
      listen,
      preview,
      blue: [blue.address],
      green: [green.address],
      greenPercent: 30,
    });
    const sequence = async () => {
      const bodies = [];
      for (let i = 0; i < 10; i++) bodies.push((await send(listen)).body);
      return { bodies, preview: (await send(preview)).body };
    };

    const first = await startChildRouter(resources, stateDir, stateDir);
    const record = readRouterRecord(stateDir);
    expect(record).toMatchObject({ pid: first.pid, port: expect.any(Number), token: expect.any(String) });
    expect(record?.startTime).toMatch(/^\d+$/);
    const before = await sequence();
    expect(before.bodies.filter((b) => b === 'green')).toHaveLength(3);
    expect(before.preview).toBe('green');
    const routesBefore = (await routerClient(stateDir).routes()).routes;

    await killChild(first, 'SIGKILL');
    expect(liveRouterRecord(stateDir)).toBeNull(); // the record is left behind, and known dead
    await expect(send(listen)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(await waitDrained(stateDir, key, [blue.address], 1_000)).toEqual({ drained: true, inFlight: 0 });

    const second = await startChildRouter(resources, stateDir, stateDir);
    expect(readRouterRecord(stateDir)?.pid).toBe(second.pid);
    expect(await sequence()).toEqual(before);
    expect((await routerClient(stateDir).routes()).routes).toEqual(routesBefore);

    // Still driven from outside: a switch through the table and the control API.
    await setRoute(stateDir, 'web', {
      listen,
      preview,
      blue: [blue.address],
      green: [green.address],
      greenPercent: 100,
    });
    expect(await routerClient(stateDir).reload()).toMatchObject({ routes: 1, problems: [] });
    expect((await send(listen)).body).toBe('green');

    await killChild(second, 'SIGTERM');
    expect(readRouterRecord(stateDir)).toBeNull(); // a router stopped cleanly removes its record
  });

  it('refuses to start a second router on the same state directory', async () => {
    if (!existsSync(compiledRouter))
      throw new Error(`${compiledRouter} is missing: run \`npm run build\` first`);
    const stateDir = await stateDirFor(resources);
    const first = await startChildRouter(resources, stateDir, stateDir);
    await expect(startChildRouter(resources, stateDir, stateDir)).rejects.toThrow(
      `a router already serves ${stateDir} (pid ${first.pid})`,
    );
  });
});
