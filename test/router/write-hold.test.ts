/**
 * The router's write hold (issue 28: the switch of a stateful component), through a real router on
 * loopback with real upstreams that count what reaches them: while a route's entry has a hold, new
 * requests wait unread; the table that ends it sends them by its weights.
 */
import { type ClientRequest, request } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { WriteHold } from '../../core/layout.js';
import { waitDrained } from '../../router/client.js';
import {
  type Answer,
  environment,
  eventually,
  freeListen,
  type Resources,
  type RouteSettings,
  recordingUpstream,
  resourcesPerTest,
  send,
  setRoute,
  startTestRouter,
  stateDirFor,
} from './support.js';

const resources = resourcesPerTest();
const key = `${environment}/web`;

function holdFor(ms: number, overrides: Partial<WriteHold> = {}): WriteHold {
  const since = Date.now();
  return { id: 'switch-1', since, expiresAt: since + ms, maxHeld: 100, ...overrides };
}

/** A router serving route `web` with blue and green upstreams that record what reaches them. */
async function switching(resources: Resources, options: { preview?: boolean } = {}) {
  const [blue, green] = await Promise.all([
    recordingUpstream(resources, 'blue'),
    recordingUpstream(resources, 'green'),
  ]);
  const stateDir = await stateDirFor(resources);
  const listen = await freeListen();
  const preview = options.preview ? await freeListen() : undefined;
  const base: RouteSettings = {
    listen,
    ...(preview ? { preview } : {}),
    blue: [blue.address],
    green: [green.address],
    greenPercent: 0,
  };
  await setRoute(stateDir, 'web', base);
  const { router, log } = await startTestRouter(resources, stateDir);
  /** Writes the route with these changes and has the router apply it (as the engine's driver does). */
  const apply = async (changes: Partial<RouteSettings>) => {
    await setRoute(stateDir, 'web', { ...base, ...changes });
    return router.reload();
  };
  const snapshot = () => router.routes().routes[key];
  const held = () => snapshot()?.hold?.held ?? 0;
  return { blue, green, stateDir, listen, preview, router, log, apply, snapshot, held };
}

/** The value of one series of the exposition. */
function sample(text: string, name: string): number {
  const labels = `environment="${environment}",route="web"`;
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  if (!line) throw new Error(`no ${name}{${labels}} in:\n${text}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('router: write hold', () => {
  it('holds new requests, none reaches blue, and sends them to green at the release, a POST body intact', async () => {
    const s = await switching(resources);
    expect(await send(s.listen)).toMatchObject({ status: 200, body: 'blue' });
    const blueBefore = s.blue.requests.length;

    const hold = holdFor(30_000, { maxHeld: 50 });
    const reload = await s.apply({ hold });
    expect(reload.holds).toEqual({ [key]: hold.id });
    expect(s.log.some((l) => l.includes(`route ${key}: holding new requests (hold ${hold.id}`))).toBe(true);

    const body = 'w'.repeat(256 * 1024);
    const gets = Array.from({ length: 9 }, (_, i) => send(s.listen, { path: `/get/${i}` }));
    const post = send(s.listen, { method: 'POST', path: '/put?k=1', body });
    await eventually(() => s.held() === 10);
    expect(s.snapshot()?.hold).toMatchObject({
      id: hold.id,
      since: hold.since,
      expiresAt: hold.expiresAt,
      held: 10,
    });
    // Held requests are in flight nowhere: blue's drain is not kept waiting by them.
    expect(s.router.inFlight(key, [s.blue.address, s.green.address])).toBe(0);
    const metricsHeld = s.router.metricsText();
    expect(sample(metricsHeld, 'cutover_route_held_requests')).toBe(10);
    expect(sample(metricsHeld, 'cutover_route_write_holds_total')).toBe(1);

    const released = await s.apply({ greenPercent: 100 });
    expect(released.holds).toEqual({});
    const answers = await Promise.all([...gets, post]);
    for (const answer of answers) expect(answer).toMatchObject({ status: 200, slot: 'green' });
    expect((answers[9] as Answer).body).toBe(`green:${body.length}`);
    expect(s.green.requests.find((r) => r.method === 'POST')?.body).toBe(body);
    expect(s.green.requests).toHaveLength(10);
    expect(s.blue.requests).toHaveLength(blueBefore);

    expect(s.snapshot()?.hold).toBeUndefined();
    expect(s.snapshot()?.lastHold).toMatchObject({
      id: hold.id,
      heldCount: 10,
      releasedTo: 'green',
      ended: 'released',
      left: 0,
    });
    expect(s.log.some((l) => /route test\/web: held 10 requests for \d+ ms, released to green/.test(l))).toBe(
      true,
    );
    const metrics = s.router.metricsText();
    expect(sample(metrics, 'cutover_route_held_requests')).toBe(0);
    expect(sample(metrics, 'cutover_route_held_requests_total')).toBe(10);
    expect(sample(metrics, 'cutover_route_write_hold_seconds_count')).toBe(1);
    expect(metrics).toMatch(
      /^cutover_route_write_hold_seconds_bucket\{environment="test",route="web",le="\+Inf"\} 1$/m,
    );
  });

  it('answers 503 with Retry-After past maxHeld, and still sends the held ones on', async () => {
    const s = await switching(resources);
    await s.apply({ hold: holdFor(30_000, { maxHeld: 2 }) });
    const held = [send(s.listen), send(s.listen)];
    await eventually(() => s.held() === 2);
    const refused = await send(s.listen);
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.body).toMatch(/switching and already holds 2 requests/);
    expect(s.snapshot()?.hold?.refused).toBe(1);
    expect(sample(s.router.metricsText(), 'cutover_route_hold_refused_total')).toBe(1);

    await s.apply({ greenPercent: 100 });
    expect((await Promise.all(held)).map((a) => a.slot)).toEqual(['green', 'green']);
    expect(s.snapshot()?.lastHold).toMatchObject({ heldCount: 2, refused: 1 });
  });

  it('releases by the weights at expiresAt, says the hold outlived its bound, and holds nothing new', async () => {
    const s = await switching(resources);
    const hold = holdFor(400);
    await s.apply({ hold });
    const held = send(s.listen);
    await eventually(() => s.held() === 1);

    expect(await held).toMatchObject({ status: 200, slot: 'blue' });
    expect(Date.now()).toBeGreaterThanOrEqual(hold.expiresAt);
    expect(s.snapshot()?.lastHold).toMatchObject({ id: hold.id, ended: 'expired', releasedTo: 'blue' });
    expect(s.log.some((l) => l.includes("the engine's hold outlived its bound"))).toBe(true);

    // The table still has the hold: the router holds nothing new under it, nor after another reload.
    expect(await send(s.listen)).toMatchObject({ status: 200, slot: 'blue' });
    expect((await s.apply({ hold, greenPercent: 0 })).holds).toEqual({});
    expect(await send(s.listen)).toMatchObject({ status: 200, slot: 'blue' });
    expect(s.snapshot()?.hold).toBeUndefined();
  });

  it('drops a held request whose client went away: nothing goes upstream for it', async () => {
    const s = await switching(resources);
    await s.apply({ hold: holdFor(30_000) });
    const gone = [openRequest(s.listen, 'GET'), openRequest(s.listen, 'POST', 'never sent on')];
    await eventually(() => s.held() === 2);
    for (const client of gone) client.destroy();
    await eventually(() => s.held() === 0);
    const kept = send(s.listen, { path: '/kept' });
    await eventually(() => s.held() === 1);

    await s.apply({ greenPercent: 100 });
    // The release is done when the reload is answered: only the kept request is on its way.
    expect(s.router.inFlight(key, [s.blue.address, s.green.address])).toBeLessThanOrEqual(1);
    expect(await kept).toMatchObject({ status: 200, slot: 'green' });
    expect(s.green.requests.map((r) => r.path)).toEqual(['/kept']);
    expect(s.blue.requests).toHaveLength(0);
    expect(s.snapshot()?.lastHold).toMatchObject({ heldCount: 3, left: 2 });
  });

  it('lets requests in flight when the hold starts finish on blue; blue drains while new ones wait', async () => {
    const s = await switching(resources);
    const slow = send(s.listen, { path: '/slow?ms=600' });
    await eventually(() => s.router.inFlight(key, [s.blue.address]) === 1);
    await s.apply({ hold: holdFor(30_000) });
    const held = send(s.listen, { path: '/after' });
    await eventually(() => s.held() === 1);

    expect(await waitDrained(s.stateDir, key, [s.blue.address], 10_000)).toEqual({
      drained: true,
      inFlight: 0,
    });
    expect(await slow).toMatchObject({ status: 200, slot: 'blue' });
    expect(s.held()).toBe(1);
    expect(s.blue.requests.map((r) => r.path)).toEqual(['/slow?ms=600']);

    await s.apply({ greenPercent: 100 });
    expect(await held).toMatchObject({ status: 200, slot: 'green' });
  });

  it('releases to blue when the switch is undone, the preview listener held as well', async () => {
    const s = await switching(resources, { preview: true });
    await s.apply({ hold: holdFor(30_000) });
    const main = send(s.listen, { method: 'POST', body: 'k=7' });
    const preview = send(s.preview as string);
    await eventually(() => s.held() === 2);
    expect(s.blue.requests).toHaveLength(0);
    expect(s.green.requests).toHaveLength(0);

    await s.apply({ greenPercent: 0 });
    expect(await main).toMatchObject({ status: 200, slot: 'blue', body: 'blue:3' });
    // The preview listener reaches green, as it always does.
    expect(await preview).toMatchObject({ status: 200, slot: 'green' });
    expect(s.snapshot()?.lastHold).toMatchObject({ heldCount: 2, releasedTo: 'blue', ended: 'released' });
    expect(s.log.some((l) => /held 2 requests for \d+ ms, released to blue/.test(l))).toBe(true);
  });

  it('ends a hold when a table with another hold comes: its requests go on, the new hold holds', async () => {
    const s = await switching(resources);
    await s.apply({ hold: holdFor(30_000, { id: 'first' }) });
    const first = send(s.listen);
    await eventually(() => s.held() === 1);
    expect((await s.apply({ hold: holdFor(30_000, { id: 'second' }) })).holds).toEqual({ [key]: 'second' });
    expect(await first).toMatchObject({ status: 200, slot: 'blue' });
    expect(s.snapshot()?.lastHold).toMatchObject({ id: 'first', ended: 'replaced' });

    const second = send(s.listen);
    await eventually(() => s.held() === 1);
    await s.apply({ greenPercent: 100 });
    expect(await second).toMatchObject({ status: 200, slot: 'green' });
  });

  it('answers held requests 503 with Retry-After when the router stops', async () => {
    const s = await switching(resources);
    await s.apply({ hold: holdFor(30_000) });
    const held = send(s.listen, { method: 'POST', body: 'k=9' });
    await eventually(() => s.held() === 1);
    const closing = s.router.close();
    const answer = await held;
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.body).toBe('cutover: the router is stopping; try again shortly\n');
    await closing;
    expect(s.blue.requests).toHaveLength(0);
    expect(s.green.requests).toHaveLength(0);
    expect(
      s.log.some((l) => /held 1 request for \d+ ms, then the router stopped: answered 503/.test(l)),
    ).toBe(true);
  });

  it('holds anew after a restart while the table has the hold, and not once its bound has passed', async () => {
    const s = await switching(resources);
    // Long enough for a router to start again on a busy machine, short enough to wait for.
    const hold = holdFor(2_000);
    await s.apply({ hold });
    await s.router.close();

    const { router, log } = await startTestRouter(resources, s.stateDir);
    expect(router.routes().routes[key]?.hold).toMatchObject({ id: hold.id, held: 0 });
    const held = send(s.listen);
    await eventually(() => router.routes().routes[key]?.hold?.held === 1);
    // Nobody releases it (the engine is gone): the bound does, by the weights in the table.
    expect(await held).toMatchObject({ status: 200, slot: 'blue' });
    expect(Date.now()).toBeGreaterThanOrEqual(hold.expiresAt);
    await router.close();

    const again = await startTestRouter(resources, s.stateDir);
    expect(again.router.routes().routes[key]?.hold).toBeUndefined();
    expect(again.log.some((l) => l.includes(`not holding: the engine's hold ${hold.id} expired`))).toBe(true);
    expect(log.some((l) => l.includes("the engine's hold outlived its bound"))).toBe(true);
    expect(await send(s.listen)).toMatchObject({ status: 200, slot: 'blue' });
  });
});

/** A request whose client can be made to go away while it waits; its errors are expected. */
function openRequest(listen: string, method: string, body?: string): ClientRequest {
  const [host, port] = listen.split(':') as [string, string];
  const req = request({ host, port: Number(port), method, path: '/gone', agent: false });
  req.on('error', () => undefined);
  req.end(body);
  return req;
}
