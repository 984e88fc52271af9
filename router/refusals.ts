import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';

/** What a client connection needs of the listener it came in on (route-listeners.ts). */
export interface ConnectionListener {
  /** The listener is going away: answers say Connection: close. */
  readonly closing: boolean;
  /** A response of this listener is over. */
  responseClosed(): void;
}

/** The router's own answer to a request it refuses: a status and one line of text. */
export interface Refusal {
  status: number;
  text: string;
}

/** The headers of the router's own answers: a text, and the connection closes after it. */
export function refusalHeaders(refusal: Refusal): Record<string, string | number> {
  return {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': Buffer.byteLength(refusal.text),
    Connection: 'close',
  };
}

/**
 * Writes `refusal` on the socket itself, where there is no response object (a malformed head, a
 * CONNECT, a broken body); nothing once the socket cannot take it.
 */
export function writeRefusal(socket: Socket, refusal: Refusal): void {
  if (!socket.writable) return;
  const headers = Object.entries(refusalHeaders(refusal))
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.write(
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? ''}\r\n${headers}\r\n${refusal.text}`,
  );
}

/** A refusal written on a socket the HTTP server no longer frames: the connection closes after it. */
export function refuseUpgrade(
  socket: Socket,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  if (socket.writable) {
    const lines = Object.entries({
      ...headers,
      'content-type': 'text/plain; charset=utf-8',
      'content-length': String(Buffer.byteLength(text)),
      connection: 'close',
    }).map(([name, value]) => `${name}: ${value}\r\n`);
    socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${lines.join('')}\r\n${text}`);
  }
  socket.destroySoon();
}
