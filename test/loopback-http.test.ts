/**
 * The HTTP client of the control calls (CLI → runner, runner → router, the preview check), against
 * a real server on loopback.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loopbackRequest } from '../platform/loopback-http.js';

let server: Server | null = null;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = null;
});

async function listen(handler: Parameters<typeof createServer>[1]): Promise<number> {
  server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

describe('loopbackRequest', () => {
  it('sends the method, path, headers and body, and gives back the status and the whole body', async () => {
    const port = await listen((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => {
        body += chunk;
      });
      req.on('end', () => {
        res.writeHead(409, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            method: req.method,
            url: req.url,
            auth: req.headers.authorization,
            length: req.headers['content-length'],
            body,
          }),
        );
      });
    });
    const answer = await loopbackRequest({
      method: 'POST',
      host: '127.0.0.1',
      port,
      path: '/verb?x=1',
      headers: { authorization: 'Bearer t' },
      body: '{"verb":"rollback","by":"zoë"}',
      timeoutMs: 5_000,
    });
    expect(answer.status).toBe(409);
    expect(JSON.parse(answer.body)).toEqual({
      method: 'POST',
      url: '/verb?x=1',
      auth: 'Bearer t',
      length: '31',
      body: '{"verb":"rollback","by":"zoë"}',
    });
  });

  it('gives up at the deadline, and on its signal', async () => {
    const port = await listen(() => {
      // never answers
    });
    const request = { method: 'GET', host: '127.0.0.1', port, path: '/' } as const;
    await expect(loopbackRequest({ ...request, timeoutMs: 200 })).rejects.toThrow('no answer within 0.2 s');
    const controller = new AbortController();
    const pending = loopbackRequest({ ...request, timeoutMs: 5_000, signal: controller.signal });
    controller.abort();
    await expect(pending).rejects.toThrow(/abort/i);
  });

  it('says when nothing listens', async () => {
    const port = await listen(() => undefined);
    server?.close();
    server = null;
    await expect(
      loopbackRequest({ method: 'GET', host: '127.0.0.1', port, path: '/', timeoutMs: 1_000 }),
    ).rejects.toThrow(/ECONNREFUSED/);
  });
});
