/**
 * The haproxy route driver against a real haproxy (Debian's 2.6), which the driver itself starts in
 * the state directory: one haproxy for the file (every case a route of its own), stopped by pid.
 * Upstreams answer their slot (`{"version": …}`).
 */
import { once } from 'node:events';
import { readFile, rename, rm } from 'node:fs/promises';
import { Agent } from 'node:http';
import { connect, createServer as createNetServer } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Route } from '../../core/topology/types.js';
import { mainServers } from '../../engine/drivers/haproxy-config.js';
import { createHaproxyDriver } from '../../engine/drivers/haproxy-driver.js';
import { showServersState } from '../../engine/drivers/haproxy-runtime.js';
import type { RouteCallContext, RouteState, SlotInfo } from '../../engine/drivers/types.js';
import { freeListen, send } from '../router/support.js';
import {
  balancerContext,
  callOptions,
  routeSpec,
  splitWeights,
  startHeldReplica,
  startSlot,
  versionsOf,
} from '../support/balancers.js';
import { Resources, resourcesPerTest } from '../support/resources.js';
import {
  haproxyMaster,
  killHaproxy,
  operatorCommand,
  requireHaproxy,
  stopHaproxyAtCleanup,
} from './support.js';

const resources = resourcesPerTest();
const shared = new Resources();
let stateDir: string;
let ctx: RouteCallContext;
const driver = createHaproxyDriver();

beforeAll(async () => {
  requireHaproxy();
  stateDir = await shared.tempDir('cutover-haproxy-');
  stopHaproxyAtCleanup(shared, stateDir);
  ctx = balancerContext(stateDir, { type: 'haproxy' });
});
afterAll(() => shared.cleanup());

/** A route with blue (and green) slots, applied at 0 % green; `set` applies another split. */
async function routeWith(name: string, extra: Partial<Route> = {}) {
  const [blue, green] = [await startSlot(resources, 'blue'), await startSlot(resources, 'green')];
  const listen = await freeListen();
  const spec = routeSpec(listen, extra);
  const state = (greenPercent: number, withGreen = true): RouteState => ({
    route: name,
    spec,
    blue,
    green: withGreen ? green : null,
    greenPercent,
  });
  const set = (greenPercent: number, withGreen = true, log: string[] = []) =>
    driver.apply(ctx, state(greenPercent, withGreen), callOptions(log));
  await set(0, false);
  return { blue, green, listen, spec, set };
}

const socket = () => path.join(stateDir, 'haproxy', 'haproxy.sock');

/** The weights haproxy has now for the servers of `slot`, by address. */
async function weightsOf(slot: SlotInfo): Promise<number[]> {
  const live = await showServersState(socket());
  return slot.addresses.map(
    (a) => live.find((s) => s.address === a && !s.backend.endsWith('_preview'))?.weight ?? -1,
  );
}

describe('haproxy route driver (real haproxy)', () => {
  it('starts haproxy, serves blue, and moves a keep-alive client to green through the runtime API in under 100 ms, with no reload', async () => {
    const route = await routeWith('keep');
    const master = haproxyMaster(stateDir);
    expect(master).not.toBeNull();
    const config = await readFile(path.join(stateDir, 'haproxy', 'haproxy.cfg'), 'utf8');
    expect(config).toContain('frontend cutover_test_keep');
    expect(config).toContain(
      `server s_${route.blue.addresses[0]?.replace(/\W/g, '_')} ${route.blue.addresses[0]} weight 1 # blue`,
    );
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    resources.add(() => agent.destroy());
    expect(await versionsOf(route.listen, 10, agent)).toEqual({ blue: 10 });

    const worker = (await operatorCommand(stateDir, 'show info')).match(/^Pid: (\d+)/m)?.[1];
    const log: string[] = [];
    // Requests on the keep-alive connection, one after the other, while the split changes: the
    // time from the call to the first answer from green is what a client sees (printed: on a busy
    // machine it measures this process's turn on a core as much as haproxy). Asserted: the runtime
    // API's part, as the driver times it, and that the first request after the call is on green.
    const started = performance.now();
    const applied = route.set(100, true, log);
    let visibleMs = Number.POSITIVE_INFINITY;
    while (performance.now() - started < 5_000) {
      const answer = await send(route.listen, { agent });
      if ((JSON.parse(answer.body) as { version: string }).version === 'green') {
        visibleMs = performance.now() - started;
        break;
      }
    }
    await applied;
    expect(visibleMs).toBeLessThan(5_000);
    // From then on, every request on that connection reaches green.
    expect(await versionsOf(route.listen, 10, agent)).toEqual({ green: 10 });
    const line = log.find((l) => l.startsWith('route keep:')) ?? '';
    expect(line).toMatch(
      /route keep: haproxy .*: 0% blue, 100% green, set through the runtime API in \d+ ms \(no reload\)/,
    );
    expect(Number(/in (\d+) ms/.exec(line)?.[1])).toBeLessThan(100);
    console.log(
      `haproxy: green visible on a keep-alive connection ${visibleMs.toFixed(1)} ms after the call; ${line}`,
    );
    expect(await weightsOf(route.green)).toEqual([1, 1]);
    expect(await weightsOf(route.blue)).toEqual([0, 0]);
    // The same worker: no reload happened.
    expect((await operatorCommand(stateDir, 'show info')).match(/^Pid: (\d+)/m)?.[1]).toBe(worker);
    expect(haproxyMaster(stateDir)).toBe(master);
    // The file says the same, for a restart.
    const after = await readFile(path.join(stateDir, 'haproxy', 'haproxy.cfg'), 'utf8');
    expect(after).toContain(`${route.green.addresses[0]} weight 1 # green`);
    expect(after).toContain(`${route.blue.addresses[0]} weight 0 # blue`);
  });

  it('serves green on the preview listener while the route stays on blue (a new listener: one reload)', async () => {
    const preview = await freeListen();
    const route = await routeWith('preview', { preview });
    const log: string[] = [];
    await route.set(0, true, log);
    expect(await versionsOf(route.listen, 6)).toEqual({ blue: 6 });
    expect(await versionsOf(preview, 6)).toEqual({ green: 6 });
    expect(log.join('\n')).toMatch(/set through the runtime API/);
  });

  it('a server disabled by hand, a weight edited by hand: observed as edited; applying again repairs both', async () => {
    const route = await routeWith('hand');
    await route.set(10);
    const observe = () => driver.observe?.(ctx, 'hand', route.spec, callOptions());
    expect(await observe()).toMatchObject({ state: 'served', greenPercent: 10 });
    const [blue1, blue2] = route.blue.addresses.map((a) => `s_${a.replace(/\W/g, '_')}`);
    await operatorCommand(stateDir, `disable server cutover_test_hand/${blue1}`);
    expect(await observe()).toMatchObject({
      state: 'edited',
      edit: `haproxy server ${route.blue.addresses[0]} disabled by hand`,
    });
    await operatorCommand(stateDir, `enable server cutover_test_hand/${blue1}`);
    await operatorCommand(stateDir, `set server cutover_test_hand/${blue2} weight 7`);
    expect(await observe()).toMatchObject({
      state: 'edited',
      edit: `haproxy server ${route.blue.addresses[1]} weight 7, cutover set 9`,
    });
    await operatorCommand(stateDir, `disable server cutover_test_hand/${blue1}`);
    await route.set(10);
    expect(await observe()).toMatchObject({ state: 'served' });
    expect(await weightsOf(route.blue)).toEqual([9, 9]);
  });

  it('drains blue: waits until the current session haproxy still carries to blue ends', async () => {
    const held = await startHeldReplica(resources);
    const green = await startSlot(resources, 'green');
    const listen = await freeListen();
    const spec = routeSpec(listen);
    const blue: SlotInfo = { component: 'web', slot: 'blue', version: 'blue', addresses: [held.address] };
    await driver.apply(ctx, { route: 'drain', spec, blue, green: null, greenPercent: 0 }, callOptions());
    const answer = send(listen);
    await held.received;
    await driver.apply(ctx, { route: 'drain', spec, blue, green, greenPercent: 100 }, callOptions());

    expect(await driver.drain(ctx, 'drain', blue.addresses, 300, callOptions())).toEqual({
      drained: false,
      inFlight: 1,
      unit: 'requests',
    });
    held.release();
    expect(await driver.drain(ctx, 'drain', blue.addresses, 10_000, callOptions())).toEqual({
      drained: true,
      inFlight: 0,
      unit: 'requests',
    });
    expect(JSON.parse((await answer).body)).toMatchObject({ version: 'blue' });
    expect(await versionsOf(listen, 4)).toEqual({ green: 4 });
  });

  it('killed: observed as not served; the next apply starts it again from its file with the same weights', async () => {
    const route = await routeWith('restart');
    await route.set(10);
    await killHaproxy(stateDir);
    const observed = await driver.observe?.(ctx, 'restart', route.spec, callOptions());
    expect(observed).toMatchObject({ state: 'not_served' });
    expect(observed?.detail).toContain('haproxy.sock');
    const log: string[] = [];
    await route.set(50, true, log);
    expect(log.join('\n')).toMatch(/started haproxy for .* from .*haproxy\.cfg/);
    expect(await weightsOf(route.blue)).toEqual([1, 1]);
    expect(Object.keys(await versionsOf(route.listen, 8)).sort()).toEqual(['blue', 'green']);
  });

  it('killed mid-change: the call fails naming the route and the socket, the file keeps the previous split, the retry starts haproxy with the new one', async () => {
    const route = await routeWith('midway');
    await route.set(10);
    const config = path.join(stateDir, 'haproxy', 'haproxy.cfg');
    const before = await readFile(config, 'utf8');
    // haproxy dies at the worst moment: a proxy in front of its runtime API kills it (master and
    // worker) when the change arrives, before haproxy has run it.
    const real = `${socket()}.real`;
    await rename(socket(), real);
    const proxy = createNetServer({ allowHalfOpen: true }, (client) => {
      client.on('error', () => undefined);
      client.once('data', (data: Buffer) => {
        if (/set server|add server/.test(data.toString())) {
          void killHaproxy(stateDir).then(() => client.destroy());
          return;
        }
        const upstream = connect({ path: real });
        upstream.on('error', () => client.destroy());
        upstream.write(data);
        client.pipe(upstream);
        upstream.pipe(client);
      });
    });
    proxy.listen(socket());
    await once(proxy, 'listening');
    resources.add(() => new Promise<void>((resolve) => proxy.close(() => resolve())));

    const apply = route.set(50);
    await expect(apply).rejects.toThrow(
      /^route midway: haproxy's runtime API stopped answering mid-change \(.*haproxy\.sock: the connection closed before haproxy answered every command.*\); .*haproxy\.cfg still holds the previous split, so a haproxy started from it serves that; the step is retried and sets the split again$/,
    );
    expect(await readFile(config, 'utf8')).toBe(before);
    await new Promise<void>((resolve) => proxy.close(() => resolve()));
    await rm(socket(), { force: true });
    await rm(real, { force: true });

    const log: string[] = [];
    await route.set(50, true, log); // the step's retry
    expect(log.join('\n')).toMatch(
      /route midway: haproxy for .* is not running .*: starting it from .*haproxy\.cfg with the new split/,
    );
    expect(await weightsOf(route.blue)).toEqual([1, 1]);
    expect(await weightsOf(route.green)).toEqual([1, 1]);
  });

  it('refuses a change haproxy rejects and leaves the previous split in place', async () => {
    const route = await routeWith('refused');
    await route.set(10);
    const before = await readFile(path.join(stateDir, 'haproxy', 'haproxy.cfg'), 'utf8');
    const bad: SlotInfo = {
      ...route.green,
      addresses: [...route.green.addresses, '127.0.0.1:70000'],
    };
    const apply = driver.apply(
      ctx,
      { route: 'refused', spec: route.spec, blue: route.blue, green: bad, greenPercent: 50 },
      callOptions(),
    );
    await expect(apply).rejects.toThrow(
      /route refused: haproxy refused the change: invalid port '70000'.* \(commands: .*add server .*127\.0\.0\.1:70000.*\); the previous split is back in place/,
    );
    expect(await readFile(path.join(stateDir, 'haproxy', 'haproxy.cfg'), 'utf8')).toBe(before);
    expect(await weightsOf(route.blue)).toEqual([9, 9]);
    expect(await driver.observe?.(ctx, 'refused', route.spec, callOptions())).toMatchObject({
      state: 'served',
      greenPercent: 10,
    });
  });
});

describe('haproxy driver weights, without haproxy', () => {
  it('spreads each slot’s share over its replicas as the smallest exact integers, at most 256, drained at 0', () => {
    const weights = (blue: number, green: number, greenPercent: number) =>
      splitWeights(mainServers, blue, green, greenPercent);
    expect(weights(2, 2, 10)).toEqual(['b0=9', 'b1=9', 'g0=1', 'g1=1']);
    expect(weights(2, 2, 100)).toEqual(['b0=0', 'b1=0', 'g0=1', 'g1=1']);
    expect(weights(2, 0, 100)).toEqual(['b0=1', 'b1=1']);
    expect(weights(7, 3, 1)).toEqual(
      [...Array(7).fill('=256'), ...Array(3).fill('=6')].map(
        (w, i) => `${i < 7 ? `b${i}` : `g${i - 7}`}${w}`,
      ),
    );
  });
});
