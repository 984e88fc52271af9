/**
 * When the router sends a request to another upstream after the first failed to answer (item 1 of
 * issue 16): never a request that may have run already, unless its method is idempotent; always
 * one that provably never reached the upstream. Real upstreams, real router, real sockets.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import { createServer as createNetServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mayRetry } from '../../router/proxy-request.js';
import {
  type ExchangeHandler,
  UpstreamExchange,
  type UpstreamFailure,
} from '../../router/upstream-exchange.js';
import { UpstreamPool, upstreamWarmConnections } from '../../router/upstream-pool.js';
import { UpstreamPools } from '../../router/upstream-pools.js';
import {
  type Answer,
  countingUpstream,
  eventually,
  freePort,
  Resources,
  rawClient,
  routerTo,
  routerWithRoute,
  send,
  setRoute,
} from './support.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

/**
 * A replica that records the body of every POST it reads in full, then hangs up without a word
 * (as a process dying mid-request does), or answers `name` (`name:body` to a POST) when `hangUp`
 * is false.
 */
async function recordingReplica(name: string, hangUp: boolean) {
  const posts: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method === 'POST') posts.push(Buffer.concat(chunks).toString());
      if (hangUp) req.socket.destroy();
      else res.end(req.method === 'POST' ? `${name}:${Buffer.concat(chunks).toString()}` : name);
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  resources.add(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    address: `127.0.0.1:${(server.address() as { port: number }).port}`,
    posts,
    open: () => sockets.size,
    /** Resets every connection (RST): the router learns of it at its next read or write. */
    resetAll: () => {
      for (const socket of sockets) socket.resetAndDestroy();
    },
  };
}

/** An upstream answering `ok` to each request head, keep-alive; it records the request lines. */
async function rawUpstream() {
  const heads: string[] = [];
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.on('data', (data: Buffer) => {
      heads.push(data.toString('latin1').split('\r\n')[0] ?? '');
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  resources.add(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    address: `127.0.0.1:${(server.address() as { port: number }).port}`,
    heads,
    /** Resets every connection (RST, as with SO_LINGER 0): the router learns of it at its next read. */
    resetAll: () => {
      for (const socket of sockets) socket.resetAndDestroy();
    },
  };
}

/** One exchange sent straight to a pool, with a handler that tells how it ended. */
function exchange(method: string) {
  let settle: (outcome: 'answered' | 'failed') => void = () => undefined;
  const outcome = new Promise<'answered' | 'failed'>((resolve) => {
    settle = resolve;
  });
  let failure: UpstreamFailure | null = null;
  const handler: ExchangeHandler = {
    upstreamConnected: () => undefined,
    upstreamHead: () => undefined,
    upstreamBody: (_chunk, last) => {
      if (last) settle('answered');
      return true;
    },
    upstreamFailed: (failed) => {
      failure = failed;
      settle('failed');
    },
  };
  const head = `${method} / HTTP/1.1\r\nHost: x\r\n${method === 'POST' ? 'Content-Length: 0\r\n' : ''}\r\n`;
  return {
    value: new UpstreamExchange(method, head, 'none', handler, 60_000, 10_000),
    outcome,
    failure: () => failure,
  };
}

async function inBatches<T>(count: number, batch: number, one: (index: number) => Promise<T>): Promise<T[]> {
  const all: T[] = [];
  for (let start = 0; start < count; start += batch)
    all.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(batch, count - start) }, (_, i) => one(start + i)),
      )),
    );
  return all;
}

describe('router: resending a request to another upstream', () => {
  it('never runs a POST twice when a replica reads it and hangs up; GETs still fail over', async () => {
    const [hangs, answers] = await Promise.all([
      recordingReplica('hangs', true),
      recordingReplica('ok', false),
    ]);
    const { listen } = await routerWithRoute(resources, {
      blue: [hangs.address, answers.address],
      green: [],
      greenPercent: 0,
    });
    // Connections opened ahead to both replicas: those the faulty one closes look like idle ones.
    await eventually(
      () => hangs.open() >= upstreamWarmConnections && answers.open() >= upstreamWarmConnections,
    );

    const posts = await inBatches(40, 4, (i) => send(listen, { method: 'POST', body: `post-${i}` }));
    const recorded = [...hangs.posts, ...answers.posts];
    const twice = recorded.filter((body, index) => recorded.indexOf(body) !== index);
    expect(twice).toEqual([]);
    // Each POST either ran once and was answered, or got 502 after the replica took it.
    posts.forEach((answer: Answer, i) => {
      if (answer.status === 200) expect(answer.body).toBe(`ok:post-${i}`);
      else expect(answer.status).toBe(502);
    });
    expect(posts.filter((a) => a.status === 502).length).toBe(hangs.posts.length);
    expect(hangs.posts.length).toBeGreaterThan(0);

    const gets = await inBatches(20, 4, () => send(listen));
    expect(gets.map((a) => [a.status, a.body])).toEqual(Array(20).fill([200, 'ok']));
  });

  it('sends a read body to the next replica when the first refuses the connection', async () => {
    const answers = await recordingReplica('ok', false);
    const refusing = `127.0.0.1:${await freePort()}`; // nothing listens there
    const { listen } = await routerWithRoute(resources, {
      blue: [refusing, answers.address],
      green: [],
      greenPercent: 0,
    });
    const body = 'b'.repeat(512 * 1024);
    const posts = await inBatches(4, 4, () => send(listen, { method: 'POST', body }));
    expect(posts.map((a) => [a.status, a.body.length])).toEqual(Array(4).fill([200, `ok:${body}`.length]));
    expect(answers.posts).toHaveLength(4);
  });

  it('answers each POST sent after the upstream reset its idle connection: that connection is dropped, not used', async () => {
    const upstream = await rawUpstream();
    // As green at 100%: no connections opened ahead, so every upstream connection is one a request used.
    const { listen } = await routerTo(resources, upstream.address, { slot: 'green' });
    const client = rawClient(resources, listen);
    const answered = (count: number) =>
      eventually(() => client.received().split('HTTP/1.1 ').length - 1 === count);
    const post = (i: number) =>
      client.socket.write(`POST /${i} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi`);

    post(0);
    await answered(1);
    for (let i = 1; i <= 20; i++) {
      // The upstream resets its idle connection just before the next request reaches the router,
      // which sees the reset first: it drops that connection and opens another (no resend is needed;
      // the resend of a request a reset connection refused is the test below).
      upstream.resetAll();
      post(i);
      await answered(i + 1);
    }
    expect(client.received().match(/HTTP\/1\.1 \d+/g)).toEqual(Array(21).fill('HTTP/1.1 200'));
    expect(upstream.heads).toEqual(Array.from({ length: 21 }, (_, i) => `POST /${i} HTTP/1.1`));
  });

  it('tells a request a reset idle connection refused from one that went out', async () => {
    const upstream = await rawUpstream();
    const pools = new UpstreamPools();
    resources.add(() => pools.destroyAll());
    const first = exchange('GET');
    pools.get(upstream.address).send(first.value);
    expect(await first.outcome).toBe('answered');

    // The upstream resets the idle connection; the POST goes out on it before the router saw that.
    upstream.resetAll();
    const post = exchange('POST');
    pools.get(upstream.address).send(post.value);
    expect(await post.outcome).toBe('failed');
    const failure = post.failure() as UpstreamFailure;
    expect([failure.requestSent, failure.staleConnection, mayRetry(failure)]).toEqual([false, true, true]);
    expect(upstream.heads).toEqual(['GET / HTTP/1.1']);
  });

  it('loses no POST while the upstream keeps closing its idle connections', async () => {
    const received: string[] = [];
    const replica = await countingUpstream(resources, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push(Buffer.concat(chunks).toString());
        res.end('ok');
      });
    });
    const { listen } = await routerTo(resources, replica.address);
    await eventually(() => replica.open() >= upstreamWarmConnections);
    const answers: Answer[] = [];
    for (let round = 0; round < 10; round++) {
      replica.dropIdle();
      answers.push(
        ...(await Promise.all(
          Array.from({ length: 4 }, (_, i) => send(listen, { method: 'POST', body: `p${round}-${i}` })),
        )),
      );
    }
    expect(answers.map((a) => [a.status, a.body])).toEqual(Array(40).fill([200, 'ok']));
    expect(received).toHaveLength(40);
  });
  /**
   * Makes the upstream reset its idle connections in the same tick as the router sends a request
   * to `address`, once: the request goes out on a kept connection that refuses its first byte.
   */
  function resetAsTheRequestGoesOut(address: string, reset: () => void) {
    const send = UpstreamPool.prototype.send;
    let armed = true;
    const spy = vi.spyOn(UpstreamPool.prototype, 'send').mockImplementation(function (
      this: UpstreamPool,
      exchange: UpstreamExchange,
    ) {
      if (armed && this.address === address) {
        armed = false;
        reset();
      }
      send.call(this, exchange);
    });
    resources.add(() => spy.mockRestore());
    return { fired: () => !armed };
  }

  it('resends to the same replica a POST its kept connection refused, when it is the only replica', async () => {
    const replica = await recordingReplica('only', false);
    // As green at 100%: no spares, so the kept connection is the one the first POST used.
    const { listen } = await routerTo(resources, replica.address, { slot: 'green' });
    expect((await send(listen, { method: 'POST', body: 'first' })).body).toBe('only:first');
    await eventually(() => replica.open() === 1);

    const reset = resetAsTheRequestGoesOut(replica.address, () => replica.resetAll());
    const answer = await send(listen, { method: 'POST', body: 'second' });
    expect(reset.fired()).toBe(true);
    expect([answer.status, answer.body]).toEqual([200, 'only:second']);
    expect(replica.posts).toEqual(['first', 'second']);
  });

  it('resends a POST a kept connection refused to the current table, not to an address it dropped', async () => {
    const [dropped, current] = await Promise.all([
      recordingReplica('dropped', false),
      recordingReplica('current', false),
    ]);
    const { stateDir, listen, router } = await routerTo(resources, dropped.address, { slot: 'green' });
    expect((await send(listen, { method: 'POST', body: 'first' })).body).toBe('dropped:first');

    // A POST whose body is still coming when the table drops its replica.
    const client = rawClient(resources, listen);
    client.socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nsec');
    await eventually(() => router.inFlight('test/web', [dropped.address]) === 1);
    await setRoute(stateDir, 'web', { listen, blue: [], green: [current.address], greenPercent: 100 });
    await router.reload();
    const reset = resetAsTheRequestGoesOut(dropped.address, () => dropped.resetAll());
    client.socket.write('ond');
    const received = () => client.received();
    await eventually(() => received().includes('\r\n\r\n') && received().endsWith('second'));
    expect(reset.fired()).toBe(true);
    expect(received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(received()).toMatch(/current:second$/);
    expect([dropped.posts, current.posts]).toEqual([['first'], ['second']]);
  });
});
