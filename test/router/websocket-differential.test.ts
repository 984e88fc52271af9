/**
 * WebSocket handshakes through the router and through a real nginx configured for WebSocket
 * proxying (nginx's documented `map $http_upgrade` and `proxy_set_header Upgrade/Connection`), both
 * in front of the same `ws` upstream: the router never upgrades a connection nginx does not, nor
 * passes on a handshake nginx refuses. Where they differ, `cases` says so and why (the README's
 * router section lists the same).
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runNginx } from '../support/nginx.js';
import { Resources } from '../support/resources.js';
import { nginxBinary } from './differential-nginx.js';
import { rawExchange } from './raw-http.js';
import { freeListen, setRoute, startTestRouter, stateDirFor } from './support.js';
import { openWs, startWsUpstream, type WsUpstream } from './websocket-support.js';

const resources = new Resources();

const key = 'dGhlIHNhbXBsZSBub25jZQ==';

/** A handshake's head (CRLFs added), and the status each proxy answers it with. */
interface Case {
  name: string;
  head: string[];
  body?: string;
  nginx: number;
  router: number;
  /** Why they differ, when they do. */
  why?: string;
}

const upgrade = ['Connection: Upgrade', 'Upgrade: websocket'];
const versioned = ['Sec-WebSocket-Version: 13', `Sec-WebSocket-Key: ${key}`];

const cases: Case[] = [
  {
    name: 'a valid handshake',
    head: ['GET / HTTP/1.1', 'Host: h', ...upgrade, ...versioned],
    nginx: 101,
    router: 101,
  },
  {
    name: 'no Sec-WebSocket-Key',
    head: ['GET / HTTP/1.1', 'Host: h', ...upgrade, 'Sec-WebSocket-Version: 13'],
    nginx: 400,
    router: 400,
  },
  {
    name: 'an unsupported Sec-WebSocket-Version',
    head: ['GET / HTTP/1.1', 'Host: h', ...upgrade, 'Sec-WebSocket-Version: 7', `Sec-WebSocket-Key: ${key}`],
    nginx: 400,
    router: 400,
  },
  {
    name: 'a POST asking to upgrade',
    head: ['POST / HTTP/1.1', 'Host: h', ...upgrade, ...versioned, 'Content-Length: 0'],
    nginx: 405,
    router: 405,
  },
  {
    name: 'another protocol than websocket',
    head: ['GET / HTTP/1.1', 'Host: h', 'Connection: Upgrade', 'Upgrade: h2c', ...versioned],
    nginx: 400,
    router: 400,
  },
  {
    name: 'the upstream refusing the handshake',
    head: ['GET /refuse HTTP/1.1', 'Host: h', ...upgrade, ...versioned],
    nginx: 403,
    router: 403,
  },
  {
    name: 'Upgrade without Connection: upgrade',
    head: ['GET / HTTP/1.1', 'Host: h', 'Upgrade: websocket', ...versioned],
    nginx: 101,
    router: 200,
    why: "nginx's map sends Connection: upgrade for any Upgrade header; the router (RFC 9110 §7.8) upgrades only what Connection asks, and serves it as a plain GET",
  },
  {
    name: 'Connection: upgrade without Upgrade',
    head: ['GET / HTTP/1.1', 'Host: h', 'Connection: Upgrade', ...versioned],
    nginx: 200,
    router: 200,
  },
  {
    name: 'a handshake with a body',
    head: ['GET / HTTP/1.1', 'Host: h', ...upgrade, ...versioned, 'Content-Length: 5'],
    body: 'hello',
    nginx: 101,
    router: 400,
    why: 'nginx sends the body upstream and then tunnels; the router refuses a body before a new protocol',
  },
  {
    name: 'two Host headers',
    head: ['GET / HTTP/1.1', 'Host: h', 'Host: i', ...upgrade, ...versioned],
    nginx: 400,
    router: 400,
  },
  {
    name: 'an HTTP/1.0 handshake',
    head: ['GET / HTTP/1.0', 'Host: h', ...upgrade, ...versioned],
    nginx: 101,
    router: 101,
  },
];

/** The first status line's code, and the exchange's bytes. */
async function handshake(listen: string, c: Case): Promise<{ status: number; received: string }> {
  const bytes = `${c.head.join('\r\n')}\r\n\r\n${c.body ?? ''}`;
  const answer = await rawExchange(listen, bytes, { until: complete });
  return {
    status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer.received)?.[1] ?? 0),
    received: answer.received,
  };
}

/** A whole answer: a 101 and the upstream's greeting, or a head and its Content-Length of body. */
function complete(received: string): boolean {
  const end = received.indexOf('\r\n\r\n');
  if (end < 0) return false;
  if (/^HTTP\/1\.[01] 101/.test(received)) return received.includes('hello');
  const length = /\r\ncontent-length: *(\d+)/i.exec(received.slice(0, end));
  return length !== null && received.length >= end + 4 + Number(length[1]);
}

let upstream: WsUpstream;
let viaNginx: string;
let viaRouter: string;
/** The same, in front of an address where nothing listens. */
let viaNginxDown: string;
let viaRouterDown: string;

beforeAll(async () => {
  upstream = await startWsUpstream(resources, 'blue');
  viaNginx = await freeListen();
  viaNginxDown = await freeListen();
  const down = await freeListen();
  const dir = await stateDirFor(resources);
  await writeFile(
    path.join(dir, 'routes.conf'),
    [
      'map $http_upgrade $connection_upgrade { default upgrade; "" close; }',
      'server {',
      `  listen ${viaNginx};`,
      '  location / {',
      `    proxy_pass http://${upstream.address};`,
      '    proxy_http_version 1.1;',
      '    proxy_set_header Upgrade $http_upgrade;',
      '    proxy_set_header Connection $connection_upgrade;',
      '  }',
      '}',
      `server { listen ${viaNginxDown}; location / { proxy_pass http://${down}; } }`,
      '',
    ].join('\n'),
  );
  await runNginx(resources, { dir, binary: nginxBinary, workers: 1, errorLogLevel: 'info' });
  const stateDir = await stateDirFor(resources);
  viaRouter = await freeListen();
  await setRoute(stateDir, 'web', {
    listen: viaRouter,
    blue: [upstream.address],
    green: [],
    greenPercent: 0,
  });
  viaRouterDown = await freeListen();
  await setRoute(stateDir, 'down', { listen: viaRouterDown, blue: [down], green: [], greenPercent: 0 });
  await startTestRouter(resources, stateDir);
  return () => resources.cleanup();
});

describe('WebSocket handshakes: the router next to nginx', () => {
  it.each(cases)('$name', async (c) => {
    const [nginx, router] = await Promise.all([handshake(viaNginx, c), handshake(viaRouter, c)]);
    expect({ nginx: nginx.status, router: router.status }).toEqual({ nginx: c.nginx, router: c.router });
    // Never an upgrade nginx would not make, nor a handshake nginx refuses passed on.
    if (nginx.status !== 101) expect(router.status).not.toBe(101);
    if (nginx.status >= 400) expect(router.status).toBeGreaterThanOrEqual(400);
    if (c.nginx === c.router) expect(c.why).toBeUndefined();
  });

  it('carries frames both ways and the close handshake as nginx does', async () => {
    for (const listen of [viaNginx, viaRouter]) {
      const client = await openWs(resources, listen);
      expect(client.greetedBy).toBe('blue');
      expect(await client.ask('ping')).toBe('blue:ping');
      const binary = Buffer.alloc(200_000, 3);
      const echoed = new Promise<Buffer>((resolve) =>
        client.socket.once('message', (data) => resolve(data as Buffer)),
      );
      client.socket.send(binary);
      expect((await echoed).equals(binary)).toBe(true);
      const before = upstream.closes.length;
      client.socket.close(4000, 'bye');
      expect((await client.closed).code).toBe(4000);
      await expect.poll(() => upstream.closes.slice(before)).toEqual([4000]);
      // And a close the upstream begins.
      const other = await openWs(resources, listen);
      other.socket.send('close');
      expect((await other.closed).code).toBe(4001);
    }
  });

  it('answers 502 when the upstream cannot be reached, as nginx does', async () => {
    const c = cases[0] as Case;
    const [nginx, router] = await Promise.all([handshake(viaNginxDown, c), handshake(viaRouterDown, c)]);
    expect({ nginx: nginx.status, router: router.status }).toEqual({ nginx: 502, router: 502 });
  });
});
