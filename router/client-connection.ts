import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { checkRequest, type RequestLine } from './request-checks.js';

/** What a client connection needs of the listener it came in on (route-listeners.ts). */
export interface ConnectionListener {
  /** The listener is going away: answers say Connection: close. */
  readonly closing: boolean;
  /** A response of this listener is over. */
  responseClosed(): void;
}

/**
 * Proxies one request; calls `client.responseClosed()` once its response is over (its 'close'),
 * whatever the answer was.
 */
export type RequestHandler = (client: ClientConnection, req: IncomingMessage, res: ServerResponse) => void;

/**
 * One client connection of a route listener, as nginx serves one: its requests are handled one at a
 * time, in the order they came. Node's server parses pipelined requests ahead and hands each over at
 * once; the router holds them here, so the upstream sees them in order, each after the previous one
 * was answered, and a request is never sent upstream once the connection is to close.
 *
 * A parse error (Node's 'clientError') is answered in its place too: after the responses of the
 * requests read before it, then the connection closes. Node's own answer went out at once, in front
 * of (and instead of) the answer to a request the upstream had already run.
 *
 * Invariant: at most one request of the connection is with the handler (`active`); the others wait
 * in `waiting`, in order, and are dropped unanswered if the connection closes first.
 */
export class ClientConnection {
  private active: ServerResponse | null = null;
  private readonly waiting: [IncomingMessage, ServerResponse][] = [];
  /** A parse error to answer once every request before it was answered. */
  private fault: NodeJS.ErrnoException | null = null;
  /** No request is handled any more: the connection closes (or closed). */
  private ended = false;

  constructor(
    private readonly listener: ConnectionListener,
    private readonly socket: Socket,
    private readonly handle: RequestHandler,
  ) {
    socket.once('close', () => {
      this.ended = true;
      this.waiting.length = 0;
    });
  }

  get closing(): boolean {
    return this.listener.closing;
  }

  request(req: IncomingMessage, res: ServerResponse): void {
    if (this.ended) return;
    if (this.active) this.waiting.push([req, res]);
    else this.start(req, res);
  }

  /** The active request's response is over: the next request may go, or the pending fault be answered. */
  responseClosed(): void {
    const finished = this.active;
    this.active = null;
    this.listener.responseClosed();
    // A response that closes the connection is its last: one with Connection: close, or one Node
    // could only delimit by closing (an HTTP/1.0 client, no length) — Node has ended the socket
    // by now. Nor is a request sent upstream for a client already gone.
    if ((finished && !finished.shouldKeepAlive) || this.socket.writableEnded || this.socket.destroyed)
      this.ended = true;
    const next = this.ended ? undefined : this.waiting.shift();
    if (next) this.start(next[0], next[1]);
    else if (this.fault && !this.ended) this.answerFault(this.fault);
  }

  /** Node could not parse what followed the requests read so far. */
  clientError(error: NodeJS.ErrnoException): void {
    if (!isParseError(error)) {
      // The socket failed (a reset): nobody is left to answer.
      this.ended = true;
      this.socket.destroy();
      return;
    }
    if (this.fault || this.ended) return;
    this.fault = error;
    // Nothing more is read: what follows the error cannot be framed.
    this.socket.pause();
    // A request whose body the error cut never reached its end: it is not sent upstream.
    const last = this.waiting[this.waiting.length - 1];
    if (last && !last[0].complete) this.waiting.pop();
    if (this.active && !this.active.req.complete) {
      // The error is in the body being streamed upstream: that request cannot be answered.
      this.ended = true;
      if (!this.active.headersSent) writeClientError(this.socket, error);
      this.socket.destroy();
      return;
    }
    if (!this.active) this.answerFault(error);
  }

  private start(req: IncomingMessage, res: ServerResponse): void {
    this.active = res;
    const verdict = checkRequest(req as RequestLine);
    if (verdict.ok) {
      req.url = verdict.target;
      this.handle(this, req, res);
      return;
    }
    // Refused before anything went upstream; the connection closes, as nginx's does after a 4xx
    // or 5xx of its own (what follows may be the refused request's body).
    res.once('close', () => this.responseClosed());
    res.shouldKeepAlive = false;
    const text = `cutover: ${verdict.reason}\n`;
    res.writeHead(verdict.status, {
      'content-type': 'text/plain; charset=utf-8',
      'content-length': Buffer.byteLength(text),
      connection: 'close',
    });
    res.end(text);
  }

  private answerFault(error: NodeJS.ErrnoException): void {
    this.ended = true;
    writeClientError(this.socket, error);
    this.socket.destroySoon();
  }
}

/** Serves `server`'s requests through one ClientConnection per connection, parse errors included. */
export function serveConnections(server: Server, listener: ConnectionListener, handle: RequestHandler): void {
  const clients = new WeakMap<Socket, ClientConnection>();
  server.on('connection', (socket: Socket) => {
    clients.set(socket, new ClientConnection(listener, socket, handle));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) =>
    clients.get(req.socket)?.request(req, res),
  );
  // Without a listener Node drops a CONNECT's connection unanswered; nginx answers 400.
  server.on('connect', (_req: IncomingMessage, socket: Socket) => {
    const text = 'cutover: CONNECT is not supported\n';
    socket.on('error', () => undefined);
    socket.end(
      `HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n` +
        `Content-Length: ${text.length}\r\nConnection: close\r\n\r\n${text}`,
    );
  });
  // Handled here, Node writes no answer of its own (its default would go ahead of earlier answers).
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    const client = clients.get(socket);
    if (client) return client.clientError(error);
    if (isParseError(error)) writeClientError(socket, error);
    socket.destroy();
  });
}

/** Node reports a request it could not read (llhttp's HPE_ codes, its timeouts), not a socket error. */
export function isParseError(error: NodeJS.ErrnoException): boolean {
  return error.code?.startsWith('HPE_') === true || error.code === 'ERR_HTTP_REQUEST_TIMEOUT';
}

/**
 * The answer to a request Node could not parse, written on the socket as Node's default
 * 'clientError' handler would (there is no response object), naming the fault; none for bytes
 * after a request that closed the connection (nginx ignores them too).
 */
export function writeClientError(socket: Socket, error: NodeJS.ErrnoException): void {
  if (!socket.writable || error.code === 'HPE_CLOSED_CONNECTION') return;
  const [status, reason] = clientErrorStatus(error.code);
  const text = `cutover: malformed request: ${clientErrorReason(error)}\n`;
  socket.write(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
}

function clientErrorStatus(code: string | undefined): [number, string] {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return [431, 'Request Header Fields Too Large'];
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [408, 'Request Timeout'];
    default:
      return [400, 'Bad Request'];
  }
}

/** llhttp's reason ("Invalid header value char"), else the error's message; one line. */
function clientErrorReason(error: NodeJS.ErrnoException): string {
  const reason = (error as { reason?: unknown }).reason;
  const text = typeof reason === 'string' && reason !== '' ? reason : error.message;
  return text.replace(/[^\x20-\x7e]+/g, ' ').slice(0, 200);
}
