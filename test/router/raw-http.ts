/**
 * Raw HTTP for the framing tests: a client that writes exact bytes on a loopback socket and reads
 * everything back, an upstream that records what it executed (a request whose body arrived whole),
 * and an upstream that answers exact bytes.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type Socket } from 'node:net';
import type { Resources } from './support.js';

/** Longest a raw exchange may take before the test gives up on it (a hung proxy, not a result). */
export const rawExchangeTimeoutMs = 15_000;

export interface RawExchange {
  /** Everything the peer sent, as latin1. */
  received: string;
  /** The peer closed the connection (rather than `until` holding first). */
  closed: boolean;
}

/**
 * Writes `bytes` to `address` (host:port) and reads until the peer closes, or until `until` holds
 * for what was read. Rejects after `rawExchangeTimeoutMs`.
 */
export function rawExchange(
  address: string,
  bytes: string | Buffer,
  until: (received: string) => boolean = () => false,
): Promise<RawExchange> {
  const [host, port] = splitAddress(address);
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let received = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(`no end to the exchange with ${address} within ${rawExchangeTimeoutMs} ms: ${received}`),
      );
    }, rawExchangeTimeoutMs);
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ received, closed });
    };
    socket.on('connect', () =>
      socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes),
    );
    socket.on('data', (data: Buffer) => {
      received += data.toString('latin1');
      if (until(received)) finish(false);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => finish(true));
  });
}

/** The status codes of the responses in `received`, in order. */
export function statuses(received: string): number[] {
  return [...received.matchAll(/HTTP\/1\.[01] (\d{3})/g)].map((match) => Number(match[1]));
}

export interface Executed {
  method: string;
  url: string;
  body: string;
  headers: IncomingMessage['headers'];
}

export interface RecordingUpstream {
  address: string;
  /** Requests received in full (head and body), in the order their bodies ended. */
  executed: Executed[];
  /** What happened, in order: `received <url>` when a request arrived, `answered <url>` when answered. */
  events: string[];
}

/**
 * A Node HTTP upstream that records each request it received in full and answers `ok`; a request
 * for a path with `?ms=N` is answered N ms after its body ended.
 */
export async function recordingUpstream(resources: Resources): Promise<RecordingUpstream> {
  const executed: Executed[] = [];
  const events: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '';
    events.push(`received ${url}`);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      executed.push({
        method: req.method ?? '',
        url,
        body: Buffer.concat(chunks).toString('latin1'),
        headers: req.headers,
      });
      const delayMs = Number(new URL(url, 'http://upstream').searchParams.get('ms') ?? 0);
      setTimeout(() => {
        events.push(`answered ${url}`);
        res.setHeader('content-type', 'text/plain');
        res.end('ok');
      }, delayMs);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  resources.add(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { address: `127.0.0.1:${(server.address() as { port: number }).port}`, executed, events };
}

/**
 * An upstream that answers each request head it reads with `answer` (exact bytes) and then keeps
 * the connection open, as a server that sent a bad head and waits would.
 */
export async function rawUpstream(resources: Resources, answer: string): Promise<{ address: string }> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let head = '';
    socket.on('data', (data: Buffer) => {
      head += data.toString('latin1');
      if (head.includes('\r\n\r\n')) {
        head = '';
        socket.write(Buffer.from(answer, 'latin1'));
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  resources.add(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { address: `127.0.0.1:${(server.address() as { port: number }).port}` };
}

function splitAddress(address: string): [string, number] {
  const colon = address.lastIndexOf(':');
  return [address.slice(0, colon).replace(/^\[|\]$/g, ''), Number(address.slice(colon + 1))];
}
