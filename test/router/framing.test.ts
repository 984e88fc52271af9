/**
 * How the router frames requests and responses, over raw sockets to the real router with real
 * upstreams (issue 16, items 4 and 5): what the upstream executed and what the client got back.
 */
import type { ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { rawExchange, rawUpstream, recordingUpstream, statuses } from './raw-http.js';
import { countingUpstream, eventually, resourcesPerTest, routerTo, send } from './support.js';

const resources = resourcesPerTest();

describe('router: request framing', () => {
  it('answers a good request before the 400 of a malformed one pipelined after it', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);

    const { received, closed } = await rawExchange(
      listen,
      'POST /orders HTTP/1.1\r\nHost: shop\r\nContent-Length: 5\r\n\r\nhello' +
        'GET /next HTTP/1.1\r\nHost: shop\r\nBroken header line\r\n\r\n',
    );

    expect(statuses(received)).toEqual([200, 400]);
    expect(received).toMatch(/\r\n\r\nok.*HTTP\/1\.1 400 .*Connection: close/s);
    expect(closed).toBe(true);
    expect(upstream.executed.map((r) => `${r.method} ${r.url} ${r.body}`)).toEqual(['POST /orders hello']);
  });

  it('answers a slow POST before the 400 of a CONNECT pipelined after it', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);

    const { received, closed } = await rawExchange(
      listen,
      'POST /orders?ms=500 HTTP/1.1\r\nHost: shop\r\nContent-Length: 5\r\n\r\nhello' +
        'CONNECT shop:443 HTTP/1.1\r\nHost: shop:443\r\n\r\n',
    );

    expect(statuses(received)).toEqual([200, 400]);
    expect(received).toMatch(/\r\n\r\nok.*HTTP\/1\.1 400 .*CONNECT is not supported/s);
    expect(closed).toBe(true);
    expect(upstream.executed.map((r) => `${r.method} ${r.url} ${r.body}`)).toEqual([
      'POST /orders?ms=500 hello',
    ]);
  });

  it('answers 400 to a CONNECT alone', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);

    const { received, closed } = await rawExchange(
      listen,
      'CONNECT shop:443 HTTP/1.1\r\nHost: shop:443\r\n\r\n',
    );

    expect(statuses(received)).toEqual([400]);
    expect(received).toMatch(/CONNECT is not supported/);
    expect(closed).toBe(true);
    expect(upstream.executed).toEqual([]);
  });

  it('answers 400 to a malformed chunk in a body on its way upstream, which the upstream never executes', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);

    const { received, closed } = await rawExchange(
      listen,
      'POST /orders HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n',
    );

    expect(statuses(received)).toEqual([400]);
    expect(received).toMatch(/malformed request/);
    expect(closed).toBe(true);
    expect(upstream.executed).toEqual([]);
  });

  it('keeps the body of a request whose Connection header names Content-Length', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);

    const { received } = await rawExchange(
      listen,
      'POST /a HTTP/1.1\r\nHost: shop\r\nConnection: content-length\r\nContent-Length: 5\r\n\r\nhello',
      { until: (text) => text.endsWith('ok') },
    );

    expect(statuses(received)).toEqual([200]);
    expect(upstream.executed.map((r) => `${r.method} ${r.url} ${r.body}`)).toEqual(['POST /a hello']);
  });

  it('keeps the body of a request whose Connection header names Transfer-Encoding', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);

    const { received } = await rawExchange(
      listen,
      'POST /a HTTP/1.1\r\nHost: shop\r\nConnection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n\r\n' +
        '5\r\nhello\r\n0\r\n\r\n',
      { until: (text) => text.endsWith('ok') },
    );

    expect(statuses(received)).toEqual([200]);
    expect(upstream.executed.map((r) => `${r.method} ${r.url} ${r.body}`)).toEqual(['POST /a hello']);
  });

  it('sends pipelined requests to the upstream one after the other, in order', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);

    const { received } = await rawExchange(
      listen,
      'POST /first?ms=300 HTTP/1.1\r\nHost: shop\r\nContent-Length: 1\r\n\r\n1' +
        'POST /second HTTP/1.1\r\nHost: shop\r\nContent-Length: 1\r\n\r\n2' +
        'GET /third HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n',
    );

    expect(statuses(received)).toEqual([200, 200, 200]);
    expect(upstream.events).toEqual([
      'received /first?ms=300',
      'answered /first?ms=300',
      'received /second',
      'answered /second',
      'received /third',
      'answered /third',
    ]);
  });

  it('replaces X-Forwarded-Proto and X-Forwarded-Host sent by the client', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);

    await rawExchange(
      listen,
      'GET / HTTP/1.1\r\nHost: shop.example\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\n' +
        'Connection: close\r\n\r\n',
    );

    const [seen] = upstream.executed;
    expect(seen?.headers['x-forwarded-proto']).toBe('http');
    expect(seen?.headers['x-forwarded-host']).toBe('shop.example');
  });

  it('sends 100 Continue to a request it accepts, and only then reads its body', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);
    const [host, port] = listen.split(':') as [string, string];
    const socket = connect({ host, port: Number(port) });
    resources.add(() => {
      socket.destroy();
    });
    let received = '';
    const seen = (pattern: RegExp) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (!pattern.test(received)) return;
          socket.off('data', check);
          resolve();
        };
        socket.on('data', check);
        check();
      });
    socket.on('data', (data: Buffer) => {
      received += data.toString('latin1');
    });

    socket.write(
      'POST /orders HTTP/1.1\r\nHost: shop\r\nExpect: 100-continue\r\nContent-Length: 5\r\n' +
        'Connection: close\r\n\r\n',
    );
    await seen(/^HTTP\/1\.1 100 Continue\r\n\r\n/);
    socket.write('hello');
    await seen(/\r\n\r\nok$/);

    expect(statuses(received)).toEqual([100, 200]);
    expect(upstream.executed.map((r) => `${r.method} ${r.url} ${r.body}`)).toEqual(['POST /orders hello']);
  });

  it('refuses a request waiting for 100 Continue without sending it', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);

    // Only the head: a client that waits for 100 Continue before it sends its body.
    const { received, closed } = await rawExchange(
      listen,
      'POST /orders HTTP/1.1\r\nHost: shop\r\nExpect: 100-continue\r\nTransfer-Encoding: gzip, chunked\r\n\r\n',
    );

    expect(statuses(received)).toEqual([501]);
    expect(closed).toBe(true);
    expect(upstream.executed).toEqual([]);
  });

  it('answers 505 to an HTTP/2.0 request line and sends nothing upstream', async () => {
    const upstream = await recordingUpstream(resources);
    const { listen } = await routerTo(resources, upstream.address);

    const { received, closed } = await rawExchange(listen, 'GET / HTTP/2.0\r\nHost: shop\r\n\r\n');

    expect(statuses(received)).toEqual([505]);
    expect(closed).toBe(true);
    expect(upstream.executed).toEqual([]);
  });
});

describe('router: reading ahead', () => {
  /** Far more than the kernel's socket buffers on loopback hold (a few MB): 4000 requests of 4 KB. */
  const floodRequests = 4_000;
  const pad = 'p'.repeat(4_000);
  /** Requests on another connection that show the router kept serving while the flood waited. */
  const otherRequests = 200;

  it('reads no further ahead of a request its upstream holds than a few requests: the client is held back', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let stuckArrived = false;
    const upstream = await countingUpstream(resources, (req, res: ServerResponse) => {
      req.resume();
      if (req.url !== '/stuck') return res.end('ok');
      stuckArrived = true;
      void held.then(() => res.end('ok'));
    });
    const { listen } = await routerTo(resources, upstream.address, { upstreamTimeoutMs: 120_000 });
    const [host, port] = listen.split(':') as [string, string];

    const flood =
      'GET /stuck HTTP/1.1\r\nHost: shop\r\n\r\n' +
      `GET /next HTTP/1.1\r\nHost: shop\r\nX-Pad: ${pad}\r\n\r\n`.repeat(floodRequests - 1) +
      'GET /last HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n';
    const socket = connect({ host, port: Number(port) });
    resources.add(() => {
      socket.destroy();
    });
    socket.on('error', () => undefined);
    let received = '';
    socket.on('data', (data: Buffer) => {
      received += data.toString('latin1');
    });
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    let written = false;
    socket.write(Buffer.from(flood, 'latin1'), () => {
      written = true;
    });

    await eventually(() => stuckArrived, 10_000);
    // The router reads on while it serves others: a router reading the whole flood ahead has done so
    // long before these are answered.
    for (let i = 0; i < otherRequests && !written; i++) expect((await send(listen)).status).toBe(200);
    expect(written).toBe(false);

    release();
    await closed;
    expect(written).toBe(true);
    const answered = statuses(received);
    expect(answered.length).toBe(floodRequests + 1);
    expect(new Set(answered)).toEqual(new Set([200]));
  }, 60_000);
});

describe('router: response framing', () => {
  for (const coding of ['gzip', 'chunked, gzip', 'gzip, chunked']) {
    it(`answers 502 to an upstream's Transfer-Encoding: ${coding}`, async () => {
      const upstream = await rawUpstream(
        resources,
        `HTTP/1.1 200 OK\r\nTransfer-Encoding: ${coding}\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
      );
      const { listen } = await routerTo(resources, upstream.address);

      const { received } = await rawExchange(
        listen,
        'GET / HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n',
      );

      expect(statuses(received)).toEqual([502]);
      expect(received).toMatch(/Transfer-Encoding/);
    });
  }

  it('answers 502 at once, naming the fault, to a response head with bare line feeds', async () => {
    const upstream = await rawUpstream(resources, 'HTTP/1.1 200 OK\nContent-Length: 2\n\nok');
    // A silence timeout longer than the test's: only the parser can answer in time.
    const { listen } = await routerTo(resources, upstream.address, { upstreamTimeoutMs: 120_000 });

    const { received } = await rawExchange(
      listen,
      'GET / HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n',
    );

    expect(statuses(received)).toEqual([502]);
    expect(received).toMatch(/bare line feed/);
  }, 20_000);
});
