/**
 * Upgrades (WebSocket handshakes) in a route's hold, through the router (in this process) to real
 * `ws` upstreams with real `ws` clients: a handshake that comes while the route is held or paused
 * waits with the held requests, in the order they came, within the same count and time (past them
 * 503 with Retry-After), and at the release opens on the slot the hold released to; a client that
 * leaves while held leaves the queue, and nothing goes upstream for it.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { WriteHold } from '../../core/layout.js';
import {
  type Answer,
  environment,
  eventually,
  freeListen,
  type RouteSettings,
  resourcesPerTest,
  send,
  setRoute,
  startTestRouter,
  stateDirFor,
} from './support.js';
import { openWs, refusedWs, startWsUpstream, type WsClient } from './websocket-support.js';

const resources = resourcesPerTest();
const key = `${environment}/web`;

function holdFor(ms: number, maxHeld = 100): WriteHold {
  const since = Date.now();
  return { id: 'switch-ws', since, expiresAt: since + ms, maxHeld };
}

/** A router serving route `web`, all to blue, with WebSocket upstreams on both slots. */
async function switching() {
  const [blue, green] = await Promise.all([
    startWsUpstream(resources, 'blue'),
    startWsUpstream(resources, 'green'),
  ]);
  const stateDir = await stateDirFor(resources);
  const base: RouteSettings = {
    listen: await freeListen(),
    blue: [blue.address],
    green: [green.address],
    greenPercent: 0,
  };
  await setRoute(stateDir, 'web', base);
  const { router, log } = await startTestRouter(resources, stateDir);
  const apply = async (changes: Partial<RouteSettings>) => {
    await setRoute(stateDir, 'web', { ...base, ...changes });
    return router.reload();
  };
  const snapshot = () => router.routes().routes[key];
  const held = () => snapshot()?.hold?.held ?? 0;
  return { blue, green, listen: base.listen, router, log, apply, snapshot, held };
}

describe('router: upgrades in a hold', () => {
  it('holds a WebSocket handshake and opens it on green at the release', async () => {
    const s = await switching();
    await s.apply({ hold: holdFor(30_000) });
    const opening = openWs(resources, s.listen, '/held');
    await eventually(() => s.held() === 1);
    expect(s.router.inFlight(key, [s.blue.address, s.green.address])).toBe(0);
    expect(s.router.metricsText()).toContain(
      `cutover_route_held_requests{environment="${environment}",route="web"} 1`,
    );

    await s.apply({ greenPercent: 100 });
    const client = await opening;
    expect(client.greetedBy).toBe('green');
    expect(await client.ask('after the hold')).toBe('green:after the hold');
    expect(s.snapshot()?.upgraded).toEqual({ blue: 0, green: 1 });
    expect(s.snapshot()?.lastHold).toMatchObject({ heldCount: 1, releasedTo: 'green', left: 0, refused: 0 });
    expect(s.blue.arrivals()).toEqual([]);
    expect(s.green.arrivals()).toEqual(['upgrade /held']);
    expect(s.router.metricsText()).toContain(
      `cutover_route_upgraded_connections{environment="${environment}",route="web",slot="green"} 1`,
    );
  });

  it('answers a paused handshake 503 with Retry-After past the pause count at once, and past its time', async () => {
    const s = await switching();
    s.router.pause(key, { timeoutMs: 1_000, maxHeld: 2 });
    const started = Date.now();
    const waiting = refusedWs(resources, s.listen, '/waits');
    await eventually(() => s.held() === 1);
    const request = send(s.listen, { path: '/request' });
    await eventually(() => s.held() === 2);
    // The handshake and the request share the pause's count: a third is refused at once.
    const over = await refusedWs(resources, s.listen, '/over');
    expect(over.status).toBe(503);
    expect(over.headers['retry-after']).toBe('5');
    expect(Date.now() - started).toBeLessThan(1_000);

    const [upgrade, plain] = await Promise.all([waiting, request]);
    expect(upgrade.status).toBe(503);
    expect(upgrade.headers['retry-after']).toBe('5');
    expect(upgrade.body).toContain('is paused; this request waited 1s');
    expect((plain as Answer).status).toBe(503);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    expect(s.held()).toBe(0);
    expect(s.router.resume(key)).toMatchObject({ heldCount: 2, refused: 3, kind: 'pause' });
    expect(s.blue.arrivals()).toEqual([]);
    expect(s.snapshot()?.upgraded).toEqual({ blue: 0, green: 0 });
  });

  it('drops a held handshake whose client went away: the count drops, nothing goes upstream', async () => {
    const s = await switching();
    await s.apply({ hold: holdFor(30_000) });
    const [host, port] = s.listen.split(':') as [string, string];
    const gone = connect({ host, port: Number(port) });
    gone.on('error', () => undefined);
    resources.add(() => {
      gone.destroy();
    });
    gone.write(
      `GET /gone HTTP/1.1\r\nHost: ${s.listen}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await eventually(() => s.held() === 1);
    gone.end();
    await eventually(() => s.held() === 0);
    const kept = openWs(resources, s.listen, '/kept');
    await eventually(() => s.held() === 1);

    await s.apply({ greenPercent: 100 });
    expect((await kept).greetedBy).toBe('green');
    expect(s.green.arrivals()).toEqual(['upgrade /kept']);
    expect(s.blue.arrivals()).toEqual([]);
    expect(s.snapshot()?.lastHold).toMatchObject({ heldCount: 2, left: 1 });
    expect(s.snapshot()?.upgraded).toEqual({ blue: 0, green: 1 });
    expect(s.router.inFlight(key, [s.blue.address, s.green.address])).toBe(0);
  });

  it('answers a held handshake 503 with Retry-After when the router stops', async () => {
    const s = await switching();
    await s.apply({ hold: holdFor(30_000) });
    const waiting = refusedWs(resources, s.listen, '/stopping');
    await eventually(() => s.held() === 1);
    await s.router.close();
    const answer = await waiting;
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.body).toBe('cutover: the router is stopping; try again shortly\n');
    expect([...s.blue.arrivals(), ...s.green.arrivals()]).toEqual([]);
  });

  it('keeps the arrival order of a burst of handshakes and requests across the release', async () => {
    const s = await switching();
    await s.apply({ hold: holdFor(30_000) });
    const sockets: Promise<WsClient>[] = [];
    const requests: Promise<Answer>[] = [];
    const expected: string[] = [];
    for (let i = 0; i < 8; i++) {
      if (i % 3 === 1) {
        sockets.push(openWs(resources, s.listen, `/ws${i}`));
        expected.push(`upgrade /ws${i}`);
      } else {
        requests.push(send(s.listen, { path: `/r${i}` }));
        expected.push(`GET /r${i}`);
      }
      await eventually(() => s.held() === i + 1);
    }
    await s.apply({ greenPercent: 100 });
    for (const answer of await Promise.all(requests))
      expect(answer).toMatchObject({ status: 200, slot: 'green' });
    for (const client of await Promise.all(sockets)) expect(client.greetedBy).toBe('green');
    expect(s.green.arrivals()).toEqual(expected);
    expect(s.blue.arrivals()).toEqual([]);
    expect(s.snapshot()?.lastHold).toMatchObject({ heldCount: 8, releasedTo: 'green' });
  });
});
