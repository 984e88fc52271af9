/**
 * An https URL of a hook or a notification webhook is called over TLS (node:https is loaded only
 * for such a URL). A plain TCP listener on loopback sees what the client sends first: a TLS
 * handshake record (0x16), not an HTTP request line.
 */
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { DurationMs } from '../../../core/topology/duration.js';
import type { HttpHook } from '../../../core/topology/hook-types.js';
import { postHook } from '../../../engine/hooks/http-hook.js';
import { sendOnce } from '../../../engine/notify/send.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

/** A listener that keeps the first byte of the first connection, then closes it. */
async function firstByteListener(): Promise<{ port: number; firstByte: Promise<number> }> {
  let resolveByte: (byte: number) => void = () => {};
  const firstByte = new Promise<number>((resolve) => {
    resolveByte = resolve;
  });
  const server = createServer((socket) => {
    socket.once('data', (data) => {
      resolveByte(data[0] as number);
      socket.destroy();
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, firstByte };
}

const tlsHandshake = 0x16;
const letterP = 'P'.charCodeAt(0);

describe('an https URL is called over TLS, an http one in plain HTTP', () => {
  it('a hook', async () => {
    for (const [scheme, expected] of [
      ['https', tlsHandshake],
      ['http', letterP],
    ] as const) {
      const { port, firstByte } = await firstByteListener();
      const hook: HttpHook = {
        name: 'h',
        retries: 0,
        retryDelay: 0 as DurationMs,
        timeout: 2_000 as DurationMs,
        http: { url: `${scheme}://127.0.0.1:${port}/hook` },
      };
      const outcome = await postHook(
        hook,
        { url: `${scheme}://127.0.0.1:${port}/hook`, body: '{}', headers: {} },
        new AbortController().signal,
      );
      expect(await firstByte).toBe(expected);
      expect(outcome.ok).toBe(false);
    }
  });

  it('a notification webhook', async () => {
    for (const [scheme, expected] of [
      ['https', tlsHandshake],
      ['http', letterP],
    ] as const) {
      const { port, firstByte } = await firstByteListener();
      const result = await sendOnce(
        { type: 'slack', url: `${scheme}://127.0.0.1:${port}/notify` } as never,
        {
          id: 'e1',
          type: 'migration.completed',
          data: { severity: 'info', environment: 'e', message: 'm' },
        } as never,
        {
          secrets: { lookup: async () => undefined } as never,
          baseDir: '.',
          timeoutMs: 2_000,
          now: () => Date.now(),
        },
      );
      expect(await firstByte).toBe(expected);
      expect(result.ok).toBe(false);
    }
  });
});
