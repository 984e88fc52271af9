/**
 * The route drivers and the write hold: the router's driver writes the hold and returns only once
 * the router holds (or has released), through a real router on loopback; nginx refuses a hold.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { WriteHold } from '../../core/layout.js';
import type { Route } from '../../core/topology/types.js';
import { createNginxDriver } from '../../engine/drivers/nginx-driver.js';
import { createRouterDriver } from '../../engine/drivers/router-driver.js';
import { PermanentDriverError, type RouteState } from '../../engine/drivers/types.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { claimRouterRecord, routerRecordPath } from '../../router/router-record.js';
import {
  environment,
  eventually,
  freeListen,
  recordingUpstream,
  resourcesPerTest,
  send,
  startTestRouter,
  stateDirFor,
} from './support.js';

const resources = resourcesPerTest();
const key = `${environment}/web`;

function callContext(stateDir: string) {
  return { environment, migrationId: 'm-hold', stateDir: StateDir.at(stateDir), baseDir: stateDir };
}

function callOptions(log: string[] = []) {
  return { signal: new AbortController().signal, log: (line: string) => log.push(line) };
}

function routeState(
  listen: string,
  blue: string,
  green: string,
  greenPercent: number,
  hold?: WriteHold,
): RouteState {
  const spec = { listen, to: 'db', shift: [100], drain: { timeout: 30_000 } } as Route;
  return {
    route: 'web',
    spec,
    blue: { component: 'db', slot: 'blue', version: '1', addresses: [blue] },
    green: { component: 'db', slot: 'green', version: '2', addresses: [green] },
    greenPercent,
    ...(hold ? { hold } : {}),
  };
}

function holdFor(ms: number): WriteHold {
  const since = Date.now();
  return { id: 'm-hold/switch', since, expiresAt: since + ms, maxHeld: 100 };
}

describe('route drivers: write hold', () => {
  it('router: apply returns with the hold in effect, and with the held requests sent on at the release', async () => {
    const [blue, green] = await Promise.all([
      recordingUpstream(resources, 'blue'),
      recordingUpstream(resources, 'green'),
    ]);
    const stateDir = await stateDirFor(resources);
    const listen = await freeListen();
    const driver = createRouterDriver();
    expect(driver.holds).toBe(true);
    const ctx = callContext(stateDir);
    const { router } = await startTestRouter(resources, stateDir);
    await driver.apply(ctx, routeState(listen, blue.address, green.address, 0), callOptions());

    const hold = holdFor(30_000);
    const log: string[] = [];
    await driver.apply(ctx, routeState(listen, blue.address, green.address, 0, hold), callOptions(log));
    // No waiting: the call returned once the router held.
    expect(router.routes().routes[key]?.hold).toMatchObject({ id: hold.id, held: 0 });
    expect(log).toContain(`route web: 100% blue, 0% green; holding new requests (hold ${hold.id})`);
    const held = send(listen, { method: 'POST', body: 'k=1' });
    await eventually(() => router.routes().routes[key]?.hold?.held === 1);

    await driver.apply(ctx, routeState(listen, blue.address, green.address, 100), callOptions());
    expect(router.routes().routes[key]?.hold).toBeUndefined();
    expect(router.routes().routes[key]?.lastHold).toMatchObject({
      id: hold.id,
      heldCount: 1,
      releasedTo: 'green',
    });
    expect(await held).toMatchObject({ status: 200, slot: 'green', body: 'green:3' });
    expect(blue.requests).toHaveLength(0);
  });

  it('router: a hold that expired before the router applied it fails the call', async () => {
    const [blue, green] = await Promise.all([
      recordingUpstream(resources, 'blue'),
      recordingUpstream(resources, 'green'),
    ]);
    const stateDir = await stateDirFor(resources);
    const listen = await freeListen();
    const ctx = callContext(stateDir);
    const driver = createRouterDriver();
    const { router } = await startTestRouter(resources, stateDir);
    await driver.apply(ctx, routeState(listen, blue.address, green.address, 0), callOptions());

    const expired = { ...holdFor(0), expiresAt: Date.now() - 1 };
    const applying = driver.apply(
      ctx,
      routeState(listen, blue.address, green.address, 0, expired),
      callOptions(),
    );
    await expect(applying).rejects.toThrow(PermanentDriverError);
    await expect(applying).rejects.toThrow(`write hold ${expired.id} expired`);
    expect(router.routes().routes[key]?.hold).toBeUndefined();
    expect(await send(listen)).toMatchObject({ status: 200, slot: 'blue' });
  });

  it('router: a hold id that expired on the router is not taken again, and the call says why', async () => {
    const stateDir = await stateDirFor(resources);
    const listen = await freeListen();
    const ctx = callContext(stateDir);
    const driver = createRouterDriver();
    const { router } = await startTestRouter(resources, stateDir);
    const first = holdFor(200);
    await driver.apply(ctx, routeState(listen, '127.0.0.1:9', '127.0.0.1:9', 0, first), callOptions());
    await eventually(() => router.routes().routes[key]?.lastHold?.ended === 'expired');

    const sameId = { ...holdFor(30_000), id: first.id };
    await expect(
      driver.apply(ctx, routeState(listen, '127.0.0.1:9', '127.0.0.1:9', 0, sameId), callOptions()),
    ).rejects.toThrow(`the router did not take write hold ${first.id}: that id expired on it before`);
    expect(router.routes().routes[key]?.hold).toBeUndefined();
  });

  it('router: a router that answers without holds (older than write holds) fails the call, saying what to do', async () => {
    const stateDir = await stateDirFor(resources);
    // The control API of a router from before write holds: it applies tables, and says nothing of holds.
    const control = createServer((req, res) => {
      req.resume();
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ version: 1, generation: 1, routes: 1, problems: [], unbound: [] }));
    });
    const port = Number((await resources.listen(control)).split(':')[1]);
    mkdirSync(path.dirname(routerRecordPath(stateDir)), { recursive: true });
    expect(claimRouterRecord(stateDir, { port, token: 'old' }).claimed).toBe(true);
    const listen = await freeListen();
    const applying = createRouterDriver().apply(
      callContext(stateDir),
      routeState(listen, '127.0.0.1:9', '127.0.0.1:9', 0, holdFor(30_000)),
      callOptions(),
    );
    await expect(applying).rejects.toThrow(PermanentDriverError);
    await expect(applying).rejects.toThrow(/cannot hold requests \(it is older than this cutover\)/);
  });

  it('nginx: refuses a state with a hold and says what to do, writing nothing', async () => {
    const dir = await stateDirFor(resources);
    const driver = createNginxDriver();
    expect(driver.holds).toBe(false);
    const applying = driver.apply(
      { ...callContext(dir), driver: { type: 'nginx', configFile: 'routes.conf', reload: ['true'] } },
      routeState('127.0.0.1:8080', '127.0.0.1:9', '127.0.0.1:9', 0, holdFor(30_000)),
      callOptions(),
    );
    await expect(applying).rejects.toThrow(PermanentDriverError);
    await expect(applying).rejects.toThrow(
      'route web: nginx cannot hold requests, and the switch of stateful component db needs a write hold; route it through the built-in router',
    );
    expect(existsSync(path.join(dir, 'routes.conf'))).toBe(false);
  });
});
