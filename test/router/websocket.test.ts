/**
 * WebSocket upgrades through the router (in this process) to real `ws` upstreams: frames both
 * ways on the slot the weights chose, kept there across a switch; counted per slot in /routes and
 * /metrics; a refused handshake passed on as a response; an upgrade after pipelined requests in its
 * turn; and the drain, which waits for upgraded connections up to its timeout and then closes them
 * with 1001 on both sides; and when their listener closes (the route left the table, the router
 * stops), they are closed with 1001 on both sides too, a client that does not answer cut after a bound.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { routerClient, waitDrained } from '../../router/client.js';
import { routerCloseGraceMs, upgradeCloseGraceMs } from '../../router/router.js';
import { rawExchange } from './raw-http.js';
import {
  environment,
  eventually,
  freeListen,
  removeRoute,
  resourcesPerTest,
  routerWithRoute,
  send,
  setRoute,
} from './support.js';
import { openWs, startWsUpstream } from './websocket-support.js';

const resources = resourcesPerTest();
const key = `${environment}/web`;

/** A WebSocket handshake's head, for raw sockets. */
function wsHandshake(listen: string, path = '/'): string {
  return [
    `GET ${path} HTTP/1.1`,
    `Host: ${listen}`,
    'Connection: Upgrade',
    'Upgrade: websocket',
    'Sec-WebSocket-Version: 13',
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
    '',
    '',
  ].join('\r\n');
}

async function twoSlots(greenPercent: number) {
  const [blue, green] = await Promise.all([
    startWsUpstream(resources, 'blue'),
    startWsUpstream(resources, 'green'),
  ]);
  const routed = await routerWithRoute(resources, {
    blue: [blue.address],
    green: [green.address],
    greenPercent,
  });
  return { blue, green, ...routed };
}

describe('WebSocket upgrades', () => {
  it('carries frames both ways on the slot chosen, and stays there across a switch', async () => {
    const { listen, stateDir, split, router } = await twoSlots(50);
    const clients = [];
    for (let i = 0; i < 6; i++) clients.push(await openWs(resources, listen));
    expect(clients.map((c) => c.greetedBy).sort()).toEqual([
      'blue',
      'blue',
      'blue',
      'green',
      'green',
      'green',
    ]);
    expect((await routerClient(stateDir).routes()).routes[key]?.upgraded).toEqual({ blue: 3, green: 3 });
    expect(router.metricsText()).toContain(
      `cutover_route_upgraded_connections{environment="${environment}",route="web",slot="blue"} 3`,
    );
    // A message larger than any socket buffer, and many small ones, come back whole and in order.
    const big = 'x'.repeat(1024 * 1024);
    for (const client of clients) expect(await client.ask(big)).toBe(`${client.greetedBy}:${big}`);
    await split(100);
    await router.reload();
    for (const client of clients)
      for (let i = 0; i < 20; i++) expect(await client.ask(`m${i}`)).toBe(`${client.greetedBy}:m${i}`);
    expect((await openWs(resources, listen)).greetedBy).toBe('green');
    // Plain requests beside them go by the table as ever.
    expect((await send(listen)).body).toBe('green');
  });

  it('passes an upstream refusing the upgrade on as a response, and closes the connection', async () => {
    const { listen, router } = await twoSlots(0);
    const answer = await rawExchange(listen, wsHandshake(listen, '/refuse'));
    expect(answer.received).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
    expect(answer.received).toContain('x-cutover-slot: blue');
    expect(answer.closed).toBe(true);
    expect(router.routes().routes[key]?.upgraded).toEqual({ blue: 0, green: 0 });
    // Counted once its connection is over: a request of blue's, not a 5xx.
    await eventually(() => router.traffic(key)?.slots.blue.requests === 1);
    expect(router.traffic(key)?.slots.blue.errors5xx).toBe(0);
  });

  it('answers the requests pipelined before an upgrade first, then upgrades', async () => {
    const { listen } = await twoSlots(0);
    const answer = await rawExchange(listen, `GET /a HTTP/1.1\r\nHost: x\r\n\r\n${wsHandshake(listen)}`, {
      until: (received) => received.includes('hello blue'),
    });
    const first = answer.received.indexOf('HTTP/1.1 200');
    const second = answer.received.indexOf('HTTP/1.1 101');
    expect(first).toBeGreaterThanOrEqual(0);
    expect(second).toBeGreaterThan(first);
  });

  it('drains: waits for upgraded connections up to its timeout, then closes them with 1001 on both sides', async () => {
    const { listen, blue, stateDir } = await twoSlots(0);
    const clients = [];
    for (let i = 0; i < 3; i++) clients.push(await openWs(resources, listen));
    const [ending, ...staying] = clients as [(typeof clients)[0], ...typeof clients];
    const timeoutMs = 1_500;
    const started = Date.now();
    const draining = waitDrained(stateDir, key, [blue.address], timeoutMs);
    // One ends itself during the drain: it is not the router's to close.
    ending.socket.close(1000, 'done');
    expect((await ending.closed).code).toBe(1000);
    const result = await draining;
    expect(result).toEqual({ drained: true, inFlight: 0, closedUpgraded: 2 });
    for (const client of staying) {
      const { code, at } = await client.closed;
      expect(code).toBe(1001);
      expect(at - started).toBeGreaterThanOrEqual(timeoutMs);
    }
    expect(blue.closes.sort()).toEqual([1000, 1001, 1001]);
    expect((await routerClient(stateDir).routes()).routes[key]?.upgraded).toEqual({ blue: 0, green: 0 });
    // Nothing open: a drain ends at once.
    expect(await waitDrained(stateDir, key, [blue.address], timeoutMs)).toEqual({
      drained: true,
      inFlight: 0,
    });
  });
});

/**
 * A WebSocket client that never closes: it answers no close frame and keeps its side of the TCP
 * connection open after the router's FIN. `ended`: what it received, once the router's FIN came.
 */
function silentWs(listen: string): { upgraded: Promise<void>; ended: Promise<string> } {
  const [host, port] = listen.split(':') as [string, string];
  const socket = connect({ host, port: Number(port), allowHalfOpen: true });
  resources.add(() => {
    socket.destroy();
  });
  let received = '';
  let upgraded!: () => void;
  socket.write(wsHandshake(listen));
  socket.on('error', () => undefined);
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
    if (received.includes('hello blue')) upgraded();
  });
  return {
    upgraded: new Promise((resolve) => {
      upgraded = resolve;
    }),
    ended: new Promise((resolve) => socket.once('end', () => resolve(received))),
  };
}

/** Whether `received` (latin1) holds an unmasked close frame 1001 with the router's reason. */
function hasGoingAway(received: string): boolean {
  const payload = received.indexOf('\x03\xe9going away');
  return payload >= 2 && received[payload - 2] === '\x88';
}

describe('WebSocket upgrades when their listener closes', () => {
  it.each(['leaves the table', 'moves to another address'])(
    'closes them with 1001 on both sides when their route %s',
    async (change) => {
      const { listen, blue, green, stateDir, router } = await twoSlots(0);
      const clients = [await openWs(resources, listen), await openWs(resources, listen)];
      if (change === 'leaves the table') await removeRoute(stateDir, 'web');
      else
        await setRoute(stateDir, 'web', {
          listen: await freeListen(),
          blue: [blue.address],
          green: [green.address],
          greenPercent: 0,
        });
      await router.reload();
      for (const client of clients) expect((await client.closed).code).toBe(1001);
      await eventually(() => blue.closes.length === 2);
      expect(blue.closes).toEqual([1001, 1001]);
    },
  );

  it('closes them with 1001 on both sides when the router stops, and cuts a client that does not answer', async () => {
    const { listen, blue, router } = await twoSlots(0);
    const client = await openWs(resources, listen);
    const silent = silentWs(listen);
    await silent.upgraded;
    const started = Date.now();
    await router.close();
    const stopMs = Date.now() - started;
    expect((await client.closed).code).toBe(1001);
    const received = await silent.ended;
    expect(received).toMatch(/^HTTP\/1\.1 101 /);
    expect(hasGoingAway(received)).toBe(true);
    // The silent client held the stop for the tunnels' bound, not the listeners' longer one.
    expect(stopMs).toBeGreaterThanOrEqual(upgradeCloseGraceMs - 100);
    expect(stopMs).toBeLessThan(routerCloseGraceMs);
    await eventually(() => blue.closes.length === 2);
    expect(blue.closes).toEqual([1001, 1001]);
  });
});
