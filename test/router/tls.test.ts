/**
 * TLS and HTTP/2 at the router's edge: one router in this process serving a TLS route (two
 * certificates chosen by SNI, HSTS, a redirect listener) and a plain route with h2c, in front of a
 * recording upstream; certificates made with openssl at test time.
 */
import { copyFileSync, renameSync } from 'node:fs';
import { createServer } from 'node:http';
import { type ClientHttp2Session, connect as http2Connect } from 'node:http2';
import { request as httpsRequest } from 'node:https';
import path from 'node:path';
import { type PeerCertificate, connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteTls } from '../../core/topology/types.js';
import { routerClient } from '../../router/client.js';
import type { Router } from '../../router/router.js';
import { makeCertificate, type TestCertificate } from '../support/certificates.js';
import { Resources } from '../support/resources.js';
import {
  eventually,
  freeListen,
  recordingUpstream,
  send,
  setRoute,
  startTestRouter,
  stateDirFor,
} from './support.js';

const resources = new Resources();
afterAll(() => resources.cleanup());

let dir: string;
let listen: string;
let redirect: string;
let plain: string;
/** A TLS route to the head-echoing upstream. */
let secureEcho: string;
let a: TestCertificate;
let b: TestCertificate;
let upstream: Awaited<ReturnType<typeof recordingUpstream>>;
let log: string[];
let router: Router;

const tlsOf = (certificates: TestCertificate[]): RouteTls => ({
  certificates: certificates.map(({ cert, key }) => ({ cert, key })),
  minVersion: 'TLSv1.2',
  http2: true,
  redirectHttp: redirect,
  hsts: { maxAge: 86_400_000, includeSubDomains: true, preload: false },
});

beforeAll(async () => {
  dir = await stateDirFor(resources);
  a = makeCertificate(dir, 'a', ['a.test', '*.a.test']);
  b = makeCertificate(dir, 'b', ['b.test']);
  upstream = await recordingUpstream(resources, 'up');
  [listen, redirect, plain] = await Promise.all([freeListen(), freeListen(), freeListen()]);
  const slots = { blue: [upstream.address], green: [], greenPercent: 0 };
  await setRoute(dir, 'web', { ...slots, listen, tls: tlsOf([a, b]) });
  // The h2c route's upstream answers 'up', or the head it received (`/head`).
  const echo = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end(req.url === '/head' ? JSON.stringify(req.headers) : 'up'));
  });
  const echoAddress = await resources.listen(echo);
  await setRoute(dir, 'plain', { blue: [echoAddress], green: [], greenPercent: 0, listen: plain, h2c: true });
  secureEcho = await freeListen();
  await setRoute(dir, 'echo', {
    blue: [echoAddress],
    green: [],
    greenPercent: 0,
    listen: secureEcho,
    tls: { certificates: [{ cert: a.cert, key: a.key }], minVersion: 'TLSv1.2', http2: true },
  });
  ({ log, router } = await startTestRouter(resources, dir));
});

/** The certificate the router shows for SNI `servername` (none: no SNI), and the protocol agreed. */
function handshake(
  options: { servername?: string; maxVersion?: 'TLSv1.1' | 'TLSv1.2'; ALPNProtocols?: string[] } = {},
): Promise<{ certificate: PeerCertificate; protocol: string | null; alpn: string | false | null }> {
  const [h, p] = listen.split(':') as [string, string];
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: h, port: Number(p), rejectUnauthorized: false, ...options }, () => {
      resolve({
        certificate: socket.getPeerCertificate(),
        protocol: socket.getProtocol(),
        alpn: socket.alpnProtocol,
      });
      socket.end();
    });
    socket.on('error', reject);
  });
}

interface TlsAnswer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
  fingerprint: string;
}

function httpsGet(servername: string, requestPath = '/'): Promise<TlsAnswer> {
  const [h, p] = listen.split(':') as [string, string];
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: h, port: Number(p), path: requestPath, servername, rejectUnauthorized: false, agent: false },
      (res) => {
        const fingerprint = (res.socket as import('node:tls').TLSSocket).getPeerCertificate().fingerprint256;
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            headers: res.headers,
            fingerprint,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

function h2Session(url: string, servername?: string): ClientHttp2Session {
  const session = http2Connect(url, { rejectUnauthorized: false, ...(servername ? { servername } : {}) });
  session.on('error', () => undefined);
  resources.add(() => {
    session.destroy();
  });
  return session;
}

function h2Request(
  session: ClientHttp2Session,
  headers: Record<string, string | string[]>,
  body?: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body === undefined });
    let answer: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    stream.on('response', (h) => {
      answer = h;
    });
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () =>
      resolve({ status: Number(answer[':status']), headers: answer, body: Buffer.concat(chunks).toString() }),
    );
    stream.on('error', reject);
    if (body !== undefined) stream.end(body);
  });
}

describe('TLS termination', () => {
  it('serves HTTP/1.1 over TLS, says https upstream, and sends HSTS', async () => {
    const head = JSON.parse((await h2Request(h2Session(`https://${secureEcho}`), { ':path': '/head' })).body);
    expect(head['x-forwarded-proto']).toBe('https');
    const answer = await httpsGet('a.test', '/hello');
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('up');
    expect(answer.headers['strict-transport-security']).toBe('max-age=86400; includeSubDomains');
    expect(answer.headers['x-cutover-slot']).toBe('blue');
    expect(upstream.requests.at(-1)?.path).toBe('/hello');
  });

  it('picks the certificate by SNI, wildcards included; an unknown name or none gets the first', async () => {
    expect((await handshake({ servername: 'b.test' })).certificate.fingerprint256).toBe(b.fingerprint);
    expect((await handshake({ servername: 'www.a.test' })).certificate.fingerprint256).toBe(a.fingerprint);
    expect((await handshake({ servername: 'other.test' })).certificate.fingerprint256).toBe(a.fingerprint);
    expect((await handshake()).certificate.fingerprint256).toBe(a.fingerprint);
  });

  it('refuses TLS 1.1 and offers h2 then http/1.1 by ALPN', async () => {
    await expect(handshake({ servername: 'a.test', maxVersion: 'TLSv1.1' })).rejects.toThrow();
    expect((await handshake({ ALPNProtocols: ['h2', 'http/1.1'] })).alpn).toBe('h2');
    expect((await handshake({ ALPNProtocols: ['http/1.1'] })).alpn).toBe('http/1.1');
  });

  it('redirects plain HTTP to https on the TLS port, keeping host and target', async () => {
    const answer = await send(redirect, { path: '/a/b?c=1' });
    expect(answer.status).toBe(308);
    expect(answer.headers.location).toBe(`https://${redirect.split(':')[0]}:${listen.split(':')[1]}/a/b?c=1`);
  });
});

describe('HTTP/2 clients', () => {
  it('proxies streams to the HTTP/1.1 upstream, bodies chunked, counted in the route metrics', async () => {
    const counted = () => router.traffic('test/web')?.slots.blue.requests ?? 0;
    const before = counted();
    const session = h2Session(`https://${listen}`, 'a.test');
    const get = await h2Request(session, { ':path': '/h2?x=1', cookie: ['a=1', 'b=2'] });
    expect(get.status).toBe(200);
    expect(get.body).toBe('up');
    expect(get.headers['x-cutover-slot']).toBe('blue');
    expect(get.headers['strict-transport-security']).toBe('max-age=86400; includeSubDomains');
    const post = await h2Request(session, { ':path': '/h2-post', ':method': 'POST' }, 'hello body');
    expect(post.body).toBe('up:10');
    expect(upstream.requests.at(-1)).toEqual({ method: 'POST', path: '/h2-post', body: 'hello body' });
    expect(counted() - before).toBe(2);
  });

  it('refuses over HTTP/2 what it refuses over HTTP/1.1', async () => {
    const session = h2Session(`https://${listen}`, 'a.test');
    const seen = upstream.requests.length;
    expect((await h2Request(session, { ':path': '/', ':method': 'TRACE' })).status).toBe(405);
    expect((await h2Request(session, { ':path': '/%00' })).status).toBe(400);
    expect(
      (await h2Request(session, { ':path': '/', ':authority': 'a.test', host: 'other.test' })).status,
    ).toBe(400);
    expect((await h2Request(session, { ':path': '/', 'x-long': 'x'.repeat(9000) })).status).toBe(431);
    expect(upstream.requests.length).toBe(seen);
  });

  it('serves h2c with prior knowledge, and HTTP/1.1, on a plain listener that asks for it', async () => {
    const session = h2Session(`http://${plain}`);
    const answer = await h2Request(session, { ':path': '/h2c' });
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('up');
    expect((await send(plain, { path: '/h1' })).body).toBe('up');
    // Cookie crumbs joined into one header, :authority as Host, and plain http said upstream.
    const head = JSON.parse((await h2Request(session, { ':path': '/head', cookie: ['a=1', 'b=2'] })).body);
    expect(head).toMatchObject({ cookie: 'a=1; b=2', host: plain, 'x-forwarded-proto': 'http' });
  });
});

describe('certificates replaced on disk', () => {
  it('new handshakes get the new certificate within 2 s; a mismatched key is not served', async () => {
    const next = makeCertificate(dir, 'next', ['b.test']);
    const before = await handshake({ servername: 'b.test' });
    expect(before.certificate.fingerprint256).toBe(b.fingerprint);
    // A rotation caught half way (the certificate first): the old pair keeps being served.
    copyFileSync(next.cert, `${b.cert}.tmp`);
    renameSync(`${b.cert}.tmp`, b.cert);
    await eventually(
      () => log.some((line) => line.includes(`the key ${b.key} does not match the certificate ${b.cert}`)),
      5_000,
    );
    expect((await handshake({ servername: 'b.test' })).certificate.fingerprint256).toBe(b.fingerprint);
    const replacedAt = Date.now();
    copyFileSync(next.key, `${b.key}.tmp`);
    renameSync(`${b.key}.tmp`, b.key);
    let seen = '';
    await eventually(async () => {
      seen = (await handshake({ servername: 'b.test' })).certificate.fingerprint256;
      return seen === next.fingerprint;
    }, 5_000);
    expect(Date.now() - replacedAt).toBeLessThan(2_000);
  });

  it('a route whose key does not match is not opened, and says why', async () => {
    const bad = await freeListen();
    const wrong = makeCertificate(dir, 'wrong', ['w.test']);
    copyFileSync(a.key, path.join(dir, 'wrong-key.key'));
    await setRoute(dir, 'bad', {
      blue: [upstream.address],
      green: [],
      greenPercent: 0,
      listen: bad,
      tls: {
        certificates: [{ cert: wrong.cert, key: path.join(dir, 'wrong-key.key') }],
        minVersion: 'TLSv1.2',
        http2: true,
      },
    });
    const result = await routerClient(dir).reload();
    const failure = result.unbound?.find((u) => u.address === bad);
    expect(failure?.cause).toContain(
      `the key ${path.join(dir, 'wrong-key.key')} does not match the certificate ${wrong.cert}`,
    );
  });
});
