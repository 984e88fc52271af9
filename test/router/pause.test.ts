/**
 * An operator's pause (`cutover proxy pause|resume`, the write hold's mechanism started through the
 * control API): new requests wait in the order they came and go on at the resume; past the pause's
 * count or time a request gets 503 with Retry-After; the pause outlives a router restart; it and a
 * stateful switch's write hold never hold one route at once.
 */
import { describe, expect, it } from 'vitest';
import { routerClient } from '../../router/client.js';
import { runCli } from '../support/cli.js';
import {
  type Answer,
  environment,
  eventually,
  recordingUpstream,
  resourcesPerTest,
  send,
  setRoute,
  startTestRouter,
  tableWithRoute,
} from './support.js';

const resources = resourcesPerTest();
const key = `${environment}/web`;

async function pausable() {
  const upstream = await recordingUpstream(resources, 'blue');
  const table = await tableWithRoute(resources, { blue: [upstream.address], green: [], greenPercent: 0 });
  const { router, log } = await startTestRouter(resources, table.stateDir);
  const cli = (...args: string[]) => runCli(['proxy', ...args, '--state-dir', table.stateDir]);
  const held = () => router.routes().routes[key]?.hold?.held ?? 0;
  return { upstream, router, log, cli, held, ...table };
}

describe('cutover proxy pause', () => {
  it('holds new requests in order and sends them on at the resume', async () => {
    const { upstream, cli, held, listen, log } = await pausable();
    const paused = await cli('pause', 'web', '--timeout', '1m');
    expect(paused).toMatchObject({ code: 0 });
    expect(paused.stdout).toContain(`${key}: paused since`);
    const answers: Promise<Answer>[] = [];
    for (let i = 1; i <= 5; i++) {
      answers.push(send(listen, { path: `/r${i}` }));
      await eventually(() => held() === i);
    }
    expect(upstream.requests).toEqual([]);
    const resumed = await cli('resume', 'web');
    expect(resumed.stdout).toContain(`${key}: resumed after`);
    expect(resumed.stdout).toContain('5 requests held, released to blue');
    expect((await Promise.all(answers)).map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(upstream.requests.map((r) => r.path)).toEqual(['/r1', '/r2', '/r3', '/r4', '/r5']);
    expect(log.some((line) => line.includes(`route ${key}: paused: holding new requests`))).toBe(true);
    expect((await send(listen)).status).toBe(200);
  });

  it('answers 503 with Retry-After past its count at once, and past its time', async () => {
    const { cli, held, listen, upstream, stateDir } = await pausable();
    await cli('pause', key, '--timeout', '1s', '--max-held', '2');
    const started = Date.now();
    const waiting = [send(listen, { path: '/a' }), send(listen, { path: '/b' })];
    await eventually(() => held() === 2);
    const over = await send(listen, { path: '/c' });
    expect(over.status).toBe(503);
    expect(over.headers['retry-after']).toBe('5');
    expect(Date.now() - started).toBeLessThan(1_000);
    for (const answer of await Promise.all(waiting)) {
      expect(answer.status).toBe(503);
      expect(answer.headers['retry-after']).toBe('5');
      expect(answer.body).toContain('is paused; this request waited 1s');
    }
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    expect(upstream.requests).toEqual([]);
    const resumed = await routerClient(stateDir).resume(key);
    expect(resumed).toMatchObject({ heldCount: 2, refused: 3, kind: 'pause', ended: 'resumed' });
  });

  it('is still paused after the router starts again', async () => {
    const { router, stateDir, listen, upstream } = await pausable();
    await routerClient(stateDir).pause(key, {});
    await router.close();
    const again = await startTestRouter(resources, stateDir);
    expect(again.router.routes().routes[key]?.hold?.pause).toMatchObject({
      timeoutMs: 30_000,
      maxHeld: 1_000,
    });
    const answer = send(listen, { path: '/after-restart' });
    await eventually(() => again.router.routes().routes[key]?.hold?.held === 1);
    await routerClient(stateDir).resume(key);
    expect((await answer).status).toBe(200);
    expect(upstream.requests.map((r) => r.path)).toEqual(['/after-restart']);
  });

  it('never holds a route with a stateful switch at once', async () => {
    const { router, stateDir, listen, upstream, cli } = await pausable();
    const hold = { id: 'switch-1', since: Date.now(), expiresAt: Date.now() + 60_000, maxHeld: 10 };
    await setRoute(stateDir, 'web', { listen, blue: [upstream.address], green: [], greenPercent: 0, hold });
    expect((await router.reload()).holds).toEqual({ [key]: 'switch-1' });
    const refused = await cli('pause', 'web');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("is in a stateful switch's write hold (switch-1)");
    // The other way round: a paused route does not take the engine's hold, and the reload says why.
    await setRoute(stateDir, 'web', { listen, blue: [upstream.address], green: [], greenPercent: 0 });
    await router.reload();
    await cli('pause', 'web');
    await setRoute(stateDir, 'web', { listen, blue: [upstream.address], green: [], greenPercent: 0, hold });
    const reload = await router.reload();
    expect(reload.holds).toEqual({ [key]: `pause@${router.routes().routes[key]?.hold?.since}` });
    expect(reload.problems.join('\n')).toContain(`${key}: paused by an operator since`);
  });
});
