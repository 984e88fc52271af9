/**
 * Raw HTTP for the framing and differential tests: a client that writes exact bytes on a loopback
 * socket and reads everything back, an upstream that records what it executed (a request whose body
 * arrived whole), and an upstream that answers exact bytes.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer } from 'node:net';
import type { Resources } from '../support/resources.js';

/** Longest a raw exchange may take before the test gives up on it (a hung proxy, not a result). */
export const rawExchangeTimeoutMs = 20_000;

export interface RawExchange {
  /** Everything the peer sent, as latin1. */
  received: string;
  /** The peer closed the connection (rather than `until` holding, or a quiet period, first). */
  closed: boolean;
  /** The exchange ended on `quietMs` without a byte from the peer. */
  quiet: boolean;
}

export interface RawExchangeOptions {
  /** Ends the exchange as soon as it holds for what was read. */
  until?: (received: string) => boolean;
  /**
   * Ends the exchange after this long without a byte from the peer: only for an exchange where the
   * peer is expected to wait for bytes that never come (a silence is then its outcome).
   */
  quietMs?: number;
}

/**
 * Writes `bytes` to `address` (host:port) and reads until the peer closes, `until` holds, or the
 * peer stays quiet for `quietMs`. Rejects after `rawExchangeTimeoutMs`.
 */
export function rawExchange(
  address: string,
  bytes: string | Buffer,
  { until, quietMs }: RawExchangeOptions = {},
): Promise<RawExchange> {
  const [host, port] = splitAddress(address);
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let received = '';
    let quiet: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      clearTimeout(quiet);
      socket.destroy();
      reject(
        new Error(
          `no end to the exchange with ${address} within ${rawExchangeTimeoutMs} ms: ${received.slice(0, 200)}`,
        ),
      );
    }, rawExchangeTimeoutMs);
    let done = false;
    const finish = (end: { closed: boolean; quiet: boolean }) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(quiet);
      socket.destroy();
      resolve({ received, ...end });
    };
    const rearm = () => {
      if (quietMs === undefined) return;
      clearTimeout(quiet);
      quiet = setTimeout(() => finish({ closed: false, quiet: true }), quietMs);
    };
    socket.on('connect', () => {
      socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
      rearm();
    });
    socket.on('data', (data: Buffer) => {
      received += data.toString('latin1');
      rearm();
      if (until?.(received)) finish({ closed: false, quiet: false });
    });
    socket.on('error', () => undefined);
    socket.on('close', () => finish({ closed: true, quiet: false }));
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
  return { address: await resources.listen(server), executed, events };
}

/**
 * An upstream that reads a request head and answers it with exact bytes: `answer(head)`'s, then
 * closes the connection (`close`) or reads the next head on it.
 */
export async function scriptedUpstream(
  resources: Resources,
  answer: (head: string) => { bytes: string; close: boolean },
): Promise<{ address: string }> {
  const server = createNetServer((socket) => {
    socket.on('error', () => undefined);
    let head = '';
    const onData = (data: Buffer) => {
      head += data.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      const { bytes, close } = answer(head.slice(0, end + 4));
      head = '';
      if (close) {
        socket.off('data', onData);
        socket.end(Buffer.from(bytes, 'latin1'));
      } else socket.write(Buffer.from(bytes, 'latin1'));
    };
    socket.on('data', onData);
  });
  return { address: await resources.listen(server) };
}

/**
 * An upstream that answers each request head it reads with `answer` (exact bytes) and then keeps
 * the connection open, as a server that sent a bad head and waits would.
 */
export function rawUpstream(resources: Resources, answer: string): Promise<{ address: string }> {
  return scriptedUpstream(resources, () => ({ bytes: answer, close: false }));
}

function splitAddress(address: string): [string, number] {
  const colon = address.lastIndexOf(':');
  return [address.slice(0, colon).replace(/^\[|\]$/g, ''), Number(address.slice(colon + 1))];
}
