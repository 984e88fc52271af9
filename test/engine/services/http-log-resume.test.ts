/**
 * The http MigrationService follows a log over Server-Sent Events and, when the stream is lost
 * before its `end`, reconnects with `Last-Event-ID` and goes on after the last line it got. The
 * server here is a real HTTP server on loopback that plays a cutover server's stream and cuts the
 * first connection half way (as a proxy or a network would).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { httpService } from '../../../engine/services/http-service.js';

const id = 'mig_00000000000000000000000001';
let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
});

const logEvent = (n: number) =>
  `id: ${n}\nevent: log\ndata: ${JSON.stringify({ at: new Date(1_700_000_000_000 + n).toISOString(), level: 'info', kind: 'stage_entered', message: `line ${n}` })}\n\n`;

it('reconnects a lost log stream with Last-Event-ID and delivers every line once', async () => {
  const asked: (string | undefined)[] = [];
  server = createServer((request, response) => {
    const last = request.headers['last-event-id'];
    asked.push(Array.isArray(last) ? last[0] : last);
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    if (asked.length === 1) {
      response.write(logEvent(1));
      response.write(logEvent(2), () => setTimeout(() => response.socket?.destroy(), 50));
      return;
    }
    const from = Number(last ?? 0);
    for (let n = from + 1; n <= 3; n++) response.write(logEvent(n));
    response.end('event: end\ndata: {}\n\n');
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const service = httpService(`http://127.0.0.1:${port}`, undefined);
  const lines = [];
  for await (const line of service.logs(id, { follow: true })) lines.push(line);
  expect(lines.map((l) => l.message)).toEqual(['line 1', 'line 2', 'line 3']);
  expect(lines[0]?.at).toBe(1_700_000_000_001);
  expect(asked).toEqual([undefined, '2']);
});
