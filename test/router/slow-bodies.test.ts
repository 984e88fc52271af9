/**
 * Clients that send their request bodies slowly (item 3 of issue 16): the router reads a body
 * before it takes an upstream connection, so slow clients hold none; a client silent too long
 * mid-body gets 408; a request that waits too long for a connection gets 503 with Retry-After.
 */
import { request } from 'node:http';
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { upstreamMaxSockets } from '../../engine/router/upstream-pool.js';
import {
  countingUpstream,
  eventually,
  freeListen,
  freePort,
  Resources,
  setRoute,
  startTestRouter,
  stateDirFor,
} from './support.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

/** A raw client connection to `listen`; what it received, as latin1 text. */
function rawClient(listen: string) {
  const [host, port] = listen.split(':') as [string, string];
  const socket = connect(Number(port), host);
  let received = '';
  socket.on('data', (data: Buffer) => {
    received += data.toString('latin1');
  });
  socket.on('error', () => undefined);
  resources.add(() => {
    socket.destroy();
  });
  return { socket, received: () => received };
}

/** One request over `agent`-less keep-alive-free HTTP; its status and how long it took, or its error. */
function timedRequest(
  listen: string,
  method: string,
  body: string | undefined,
  timeoutMs: number,
): Promise<{ status: number; ms: number } | { error: string; ms: number }> {
  const [host, port] = listen.split(':') as [string, string];
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request({ host, port: Number(port), method, path: '/', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
      res.on('error', (error) => resolve({ error: error.message, ms: performance.now() - started }));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (error) => resolve({ error: error.message, ms: performance.now() - started }));
    req.end(body);
  });
}

/** A mebibyte: the router's bound for a body it reads whole before sending it. */
const mebibyte = 1024 * 1024;

function percentile(values: number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * fraction) - 1)] ?? Number.NaN;
}

describe('router: slow request bodies', () => {
  it('keeps serving a route while 260 clients trickle 1 MB bodies, and answers those 408 once they stall', async () => {
    const bodyTimeoutMs = 1_500;
    const trickleIntervalMs = 300;
    const slowClients = 260;
    let slowPostsSeen = 0;
    const app = await countingUpstream(resources, (req, res) => {
      if (req.headers['x-slow'] !== undefined) slowPostsSeen++;
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    const stateDir = await stateDirFor(resources);
    const listen = await freeListen();
    await setRoute(stateDir, 'web', {
      listen,
      blue: [app.address],
      green: [],
      greenPercent: 0,
      bodyTimeoutMs,
    });
    await startTestRouter(resources, stateDir);

    // The attack: each declares 1 MB and sends a byte at a time, often enough not to time out.
    const slow = Array.from({ length: slowClients }, () => rawClient(listen));
    await Promise.all(
      slow.map(
        ({ socket }) =>
          new Promise<void>((resolve) =>
            socket.write(
              'POST /upload HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\nContent-Length: 1000000\r\n\r\nx',
              () => resolve(),
            ),
          ),
      ),
    );
    const trickle = setInterval(() => {
      for (const { socket } of slow) socket.write('x');
    }, trickleIntervalMs);
    resources.add(() => clearInterval(trickle));

    // Ordinary requests meanwhile, four at a time: GETs and small POSTs, for at least two
    // bodyTimeouts, so that a slow client still sending would have been cut by a wrong timer.
    const results: Awaited<ReturnType<typeof timedRequest>>[] = [];
    const attackStarted = performance.now();
    for (let round = 0; round < 50 || performance.now() - attackStarted < 2 * bodyTimeoutMs; round++) {
      results.push(
        ...(await Promise.all([
          timedRequest(listen, 'GET', undefined, 2_000),
          timedRequest(listen, 'POST', 'small', 2_000),
          timedRequest(listen, 'GET', undefined, 2_000),
          timedRequest(listen, 'POST', '{"a":1}', 2_000),
        ])),
      );
      if (results.some((r) => !('status' in r))) break;
      await sleep(10);
    }
    clearInterval(trickle);
    // None of them was answered while it kept sending.
    expect(slow.filter((client) => client.received() !== '')).toEqual([]);
    const failed = results.filter((r) => !('status' in r) || r.status !== 200);
    expect(failed).toEqual([]);
    const p99 = percentile(
      results.map((r) => r.ms),
      0.99,
    );
    expect(p99, `p99 of ${results.length} ordinary requests, ms`).toBeLessThan(50);
    // The slow bodies never reached the upstream, nor took its connections.
    expect(slowPostsSeen).toBe(0);

    // Stalled now: every slow client gets 408, on a connection then closed.
    await eventually(
      () => slow.every((client) => client.received().startsWith('HTTP/1.1 408 ')),
      bodyTimeoutMs + 5_000,
    );
    expect(slow[0]?.received()).toMatch(
      /no byte of its request body for 1\.5s \(bodyTimeout of route test\/web\)/,
    );
    await eventually(() => slow.every((client) => client.socket.destroyed || client.socket.readableEnded));
    expect(slowPostsSeen).toBe(0);
  });

  it(`answers 503 with Retry-After when all ${upstreamMaxSockets} connections to an upstream stay busy for the route's queueTimeout`, async () => {
    const queueTimeoutMs = 1_000;
    const held: (() => void)[] = [];
    const app = await countingUpstream(resources, (req, res) => {
      req.resume();
      held.push(() => res.end('late'));
    });
    const stateDir = await stateDirFor(resources);
    const listen = await freeListen();
    await setRoute(stateDir, 'web', {
      listen,
      blue: [app.address],
      green: [],
      greenPercent: 0,
      queueTimeoutMs,
    });
    await startTestRouter(resources, stateDir);

    const busy = Array.from({ length: upstreamMaxSockets }, () =>
      timedRequest(listen, 'GET', undefined, 20_000),
    );
    await eventually(() => held.length === upstreamMaxSockets, 10_000);
    const [host, port] = listen.split(':') as [string, string];
    const waited = await new Promise<{ status: number; retryAfter: string | undefined; body: string }>(
      (resolve, reject) => {
        const req = request({ host, port: Number(port), path: '/', agent: false }, (res) => {
          let body = '';
          res.on('data', (chunk: Buffer) => {
            body += chunk.toString();
          });
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], body }),
          );
        });
        req.on('error', reject);
        req.end();
      },
    );
    expect(waited.status).toBe(503);
    expect(waited.retryAfter).toMatch(/^\d+$/);
    expect(waited.body).toMatch(/no connection to 127\.0\.0\.1:\d+ came free within 1s/);
    for (const release of held) release();
    const answers = await Promise.all(busy);
    expect(answers.filter((a) => 'status' in a && a.status === 200)).toHaveLength(upstreamMaxSockets);
  });

  it('closes the connection when it answers before the body was read: no upstream took it', async () => {
    const refusing = `127.0.0.1:${await freePort()}`; // nothing listens there
    const stateDir = await stateDirFor(resources);
    const listen = await freeListen();
    await setRoute(stateDir, 'web', { listen, blue: [refusing], green: [], greenPercent: 0 });
    await startTestRouter(resources, stateDir);
    const client = rawClient(listen);
    let closed = false;
    client.socket.on('close', () => {
      closed = true;
    });
    // Past the buffered size, so the router asks for a connection before the body is all there.
    client.socket.write(`POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: ${2 * mebibyte}\r\n\r\n`);
    client.socket.write(Buffer.alloc(mebibyte + 16, 'u'));
    await eventually(() => closed, 10_000);
    expect(client.received()).toMatch(/^HTTP\/1\.1 502 /);
    expect(client.received()).toMatch(/\r\nconnection: close\r\n/i);
  });
});
