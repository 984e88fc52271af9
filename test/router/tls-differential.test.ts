/**
 * The TLS differential test (issue 31): the same client handshakes through the router and through a
 * real nginx terminating the same certificates (TLSv1.2 and 1.3, HTTP/2 by ALPN, a default server
 * and one named by SNI), each in front of its own recording upstream. The safety property, for
 * every case: the router never forwards a request nginx refuses. What each did is compared too:
 * every difference is pinned in `knownDifferences` (and listed in docs/router.md), so a new one
 * fails the test.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { connect as http2Connect } from 'node:http2';
import { connect as netConnect } from 'node:net';
import path from 'node:path';
import { type ConnectionOptions, type TLSSocket, connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routerClient } from '../../router/client.js';
import { makeCertificate, type TestCertificate } from '../support/certificates.js';
import { runNginx } from '../support/nginx.js';
import { nginxBinary } from './differential-nginx.js';
import {
  freeListen,
  Resources,
  recordingUpstream,
  setRoute,
  startTestRouter,
  stateDirFor,
} from './support.js';

const resources = new Resources();
afterAll(() => resources.cleanup());

/** What a proxy did with one case: the handshake, then the request sent over it. */
interface Outcome {
  handshake: 'ok' | 'refused';
  /** Which certificate it showed ('a', 'b'), the TLS version and ALPN protocol agreed. */
  certificate?: string;
  version?: string | null;
  alpn?: string | false | null;
  /** The status line's code, or 'none' when the connection closed without an answer. */
  status?: string;
  /** Requests its upstream executed for this case. */
  executed: number;
}

interface Case {
  name: string;
  tls?: ConnectionOptions;
  /** Over HTTP/2 (ALPN h2) rather than HTTP/1.1; or bytes written on the TCP connection, no TLS. */
  http2?: boolean;
  raw?: string;
}

const cases: Case[] = [
  { name: 'TLS 1.2, SNI of the default certificate', tls: { servername: 'a.test', maxVersion: 'TLSv1.2' } },
  { name: 'TLS 1.3, SNI of the second certificate', tls: { servername: 'b.test', minVersion: 'TLSv1.3' } },
  { name: 'SNI under a wildcard', tls: { servername: 'www.a.test' } },
  { name: 'SNI miss: an unknown name', tls: { servername: 'unknown.test' } },
  { name: 'no SNI', tls: {} },
  { name: 'TLS 1.1 only', tls: { servername: 'a.test', minVersion: 'TLSv1', maxVersion: 'TLSv1.1' } },
  { name: 'TLS 1.0 only', tls: { servername: 'a.test', minVersion: 'TLSv1', maxVersion: 'TLSv1' } },
  {
    name: 'only RSA suites against an ECDSA certificate',
    tls: { servername: 'a.test', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA' },
  },
  {
    name: 'an old CBC suite (ECDHE-ECDSA-AES128-SHA)',
    tls: { servername: 'a.test', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA' },
  },
  {
    name: 'ALPN h2 agreed, then HTTP/1.1 bytes',
    tls: { servername: 'a.test', ALPNProtocols: ['h2', 'http/1.1'] },
  },
  { name: 'ALPN of an unknown protocol only', tls: { servername: 'a.test', ALPNProtocols: ['spdy/3'] } },
  { name: 'HTTP/2 request', http2: true, tls: { servername: 'b.test' } },
  { name: 'plain HTTP to the TLS port', raw: 'GET /{case} HTTP/1.1\r\nHost: a.test\r\n\r\n' },
  { name: 'a truncated ClientHello', raw: '\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03' },
];

/**
 * Where the router and nginx differ, by case name, with the reason; docs/router.md lists them. Alike
 * in every other case: the certificate shown (by SNI, wildcard, miss, none), the version agreed,
 * TLS 1.0/1.1 and suites without a shared cipher refused, ALPN (h2, none, an unknown protocol
 * refused by both), HTTP/1.1 bytes on an h2 connection unanswered, a truncated ClientHello.
 */
const knownDifferences: Record<string, { router: Partial<Outcome>; nginx: Partial<Outcome>; why: string }> = {
  'plain HTTP to the TLS port': {
    router: { status: 'none' },
    nginx: { status: '400' },
    why: 'nginx answers 400 "The plain HTTP request was sent to HTTPS port" in clear; the router closes the connection',
  },
};

let certificates: Record<'a' | 'b', TestCertificate>;
/** The router's state directory (its routing table). */
let routerDir: string;
const listens = { router: '', nginx: '' };
const upstreams: Record<'router' | 'nginx', Awaited<ReturnType<typeof recordingUpstream>>> = {} as never;

beforeAll(async () => {
  const dir = await stateDirFor(resources);
  routerDir = dir;
  certificates = {
    a: makeCertificate(dir, 'a', ['a.test', '*.a.test']),
    b: makeCertificate(dir, 'b', ['b.test']),
  };
  upstreams.router = await recordingUpstream(resources, 'router-up');
  upstreams.nginx = await recordingUpstream(resources, 'nginx-up');
  listens.router = await freeListen();
  listens.nginx = await freeListen();
  const pairs = [certificates.a, certificates.b].map(({ cert, key }) => ({ cert, key }));
  await setRoute(dir, 'web', {
    listen: listens.router,
    blue: [upstreams.router.address],
    green: [],
    greenPercent: 0,
    tls: { certificates: pairs, minVersion: 'TLSv1.2', http2: true },
  });
  await startTestRouter(resources, dir);
  await writeFile(
    path.join(dir, 'routes.conf'),
    nginxTlsConf(listens.nginx, upstreams.nginx.address, certificates),
  );
  await runNginx(resources, { dir, binary: nginxBinary, workers: 1, errorLogLevel: 'info' });
});

/** nginx terminating TLS as the router does: TLSv1.2+, http2, the first server the default. */
function nginxTlsConf(listen: string, upstream: string, c: Record<'a' | 'b', TestCertificate>): string {
  const server = (names: string, pair: TestCertificate) => `
server {
    listen ${listen} ssl http2;
    server_name ${names};
    ssl_certificate ${pair.cert};
    ssl_certificate_key ${pair.key};
    ssl_protocols TLSv1.2 TLSv1.3;
    location / {
        proxy_pass http://up;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
    }
}`;
  return `upstream up { server ${upstream}; keepalive 8; }\n${server('a.test *.a.test', c.a)}\n${server('b.test', c.b)}\n`;
}

const exchangeTimeoutMs = 5_000;

/** One case against one proxy. */
async function run(proxy: 'router' | 'nginx', index: number, c: Case): Promise<Outcome> {
  const [host, port] = listens[proxy].split(':') as [string, string];
  const id = `t${index}`;
  const before = upstreams[proxy].requests.filter((r) => r.path.includes(`/${id}`)).length;
  const executed = () => upstreams[proxy].requests.filter((r) => r.path.includes(`/${id}`)).length - before;
  if (c.raw !== undefined) {
    const status = await rawExchange(host, Number(port), c.raw.replace('{case}', id));
    return { handshake: 'refused', status, executed: executed() };
  }
  let socket: TLSSocket;
  try {
    socket = await handshake(host, Number(port), {
      ...(c.tls ?? {}),
      ...(c.http2 ? { ALPNProtocols: ['h2'] } : {}),
    });
  } catch {
    return { handshake: 'refused', executed: executed() };
  }
  const fingerprint = socket.getPeerCertificate().fingerprint256;
  const outcome: Outcome = {
    handshake: 'ok',
    certificate:
      fingerprint === certificates.a.fingerprint
        ? 'a'
        : fingerprint === certificates.b.fingerprint
          ? 'b'
          : '?',
    version: socket.getProtocol(),
    alpn: socket.alpnProtocol,
    executed: 0,
  };
  outcome.status = c.http2 ? await http2Get(socket, id) : await http1Get(socket, id);
  outcome.executed = executed();
  return outcome;
}

function handshake(host: string, port: number, options: ConnectionOptions): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host, port, rejectUnauthorized: false, ...options }, () => resolve(socket));
    socket.once('error', reject);
    socket.setTimeout(exchangeTimeoutMs, () => socket.destroy(new Error('timeout')));
  });
}

function http1Get(socket: TLSSocket, id: string): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 'none'));
    socket.write(`GET /${id} HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n`);
  });
}

function http2Get(socket: TLSSocket, id: string): Promise<string> {
  return new Promise((resolve) => {
    const session = http2Connect('https://a.test', { createConnection: () => socket });
    session.on('error', () => resolve('none'));
    const stream = session.request({ ':path': `/${id}` });
    stream.on('response', (headers) => {
      stream.resume();
      stream.on('end', () => {
        session.close();
        resolve(String(headers[':status']));
      });
    });
    stream.on('error', () => resolve('none'));
  });
}

function rawExchange(host: string, port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const socket = netConnect({ host, port }, () => socket.end(Buffer.from(bytes, 'latin1')));
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.setTimeout(exchangeTimeoutMs, () => socket.destroy());
    socket.on('close', () => resolve(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 'none'));
  });
}

describe('TLS: the router next to nginx terminating the same certificates', () => {
  it('never forwards what nginx refuses; every other difference is known', async () => {
    const differences: Record<string, { router: Outcome; nginx: Outcome }> = {};
    const unsafe: string[] = [];
    for (const [index, c] of cases.entries()) {
      const [router, nginx] = await Promise.all([run('router', index, c), run('nginx', index, c)]);
      if (router.executed > nginx.executed)
        unsafe.push(`${c.name}: router ${JSON.stringify(router)}, nginx ${JSON.stringify(nginx)}`);
      if (JSON.stringify(router) !== JSON.stringify(nginx)) differences[c.name] = { router, nginx };
    }
    expect(unsafe).toEqual([]);
    const expected = Object.fromEntries(
      Object.keys(differences).map((name) => [name, knownDifferences[name] ? 'known' : differences[name]]),
    );
    expect(expected).toEqual(
      Object.fromEntries(Object.keys(knownDifferences).map((name) => [name, 'known'])),
    );
    for (const [name, { router, nginx }] of Object.entries(differences)) {
      const known = knownDifferences[name];
      expect(router).toMatchObject(known?.router ?? {});
      expect(nginx).toMatchObject(known?.nginx ?? {});
    }
  });

  it('refuses bad certificate files as nginx does: a key of another certificate, a missing file, no PEM', async () => {
    const dir = await stateDirFor(resources);
    const other = makeCertificate(dir, 'other', ['other.test']);
    const broken = path.join(dir, 'broken.pem');
    await writeFile(broken, 'not a certificate\n');
    const bad = {
      'a key of another certificate': { cert: certificates.a.cert, key: other.key },
      'a missing certificate file': { cert: path.join(dir, 'gone.pem'), key: other.key },
      'a file that holds no PEM certificate': { cert: broken, key: other.key },
    };
    for (const [name, pair] of Object.entries(bad)) {
      const listen = await freeListen();
      const conf = path.join(dir, `${name.replaceAll(' ', '-')}.conf`);
      await writeFile(
        conf,
        `pid ${dir}/t.pid; error_log stderr; events {} http { server { listen ${listen} ssl; ssl_certificate ${pair.cert}; ssl_certificate_key ${pair.key}; } }\n`,
      );
      const nginxTest = await promisify(execFile)(nginxBinary, ['-t', '-p', dir, '-c', conf]).then(
        () => 'accepted',
        () => 'refused',
      );
      await setRoute(routerDir, 'bad', {
        listen,
        blue: [upstreams.router.address],
        green: [],
        greenPercent: 0,
        tls: { certificates: [pair], minVersion: 'TLSv1.2', http2: true },
      });
      const reload = await routerClient(routerDir).reload();
      const router = reload.unbound?.some((u) => u.address === listen) ? 'refused' : 'accepted';
      expect({ name, nginx: nginxTest, router }).toEqual({ name, nginx: 'refused', router: 'refused' });
    }
  });
});
