import { type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { type ReadControl, readControl } from './read-control.js';
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

/** Proxies a request that upgrades its connection (proxy-upgrade.ts); the socket is its from now on. */
export type UpgradeHandler = (req: IncomingMessage, socket: Socket, head: Buffer) => void;

/**
 * Requests of one connection parsed ahead of the one being answered, at most, before the router
 * stops reading the connection (nginx reads no further than its header buffers). Node's parser takes
 * a whole read of the socket at a time (up to 64 KiB), so the requests of that one read may be parsed
 * too; nothing more is read until fewer wait, and TCP holds the client back.
 */
export const maxWaitingRequests = 4;

/** The router's own answer to a request it refuses: a status and one line of text. */
export interface Refusal {
  status: number;
  text: string;
}

/** CONNECT tunnels nothing here: nginx answers it 400 too. */
const connectRefusal: Refusal = { status: 400, text: 'cutover: CONNECT is not supported\n' };

/**
 * One client connection of a route listener, as nginx serves one: its requests are handled one at a
 * time, in the order they came. Node's server parses pipelined requests ahead and hands each over at
 * once; the router holds them here, so the upstream sees them in order, each after the previous one
 * was answered, and a request is never sent upstream once the connection is to close.
 *
 * What ends a connection early is answered in its place too: a parse error (Node's 'clientError')
 * or a CONNECT (Node's 'connect', which detaches the socket from the parser). Its answer goes out
 * after the responses of the requests read before it, then the connection closes. Node's own answer
 * went out at once, in front of (and instead of) the answer to a request the upstream had already run.
 *
 * Invariants: at most one request of the connection is with the handler (`active`); the others wait
 * in `waiting`, in order, and are dropped unanswered if the connection closes first. While
 * `maxWaitingRequests` wait, or once a fault is due, the socket is not read.
 */
export class ClientConnection {
  private active: ServerResponse | null = null;
  /** The active request waits for 100 Continue before it sends its body (not sent yet). */
  private activeAwaitsContinue = false;
  /** Requests read ahead, and whether each waits for 100 Continue. */
  private readonly waiting: [IncomingMessage, ServerResponse, boolean][] = [];
  /**
   * What ended the connection, to answer (`answer`, or nothing) once every request before it was
   * answered.
   */
  private fault: { answer: Refusal | null } | null = null;
  /** No request is handled any more: the connection closes (or closed). */
  private ended = false;
  private readonly reading: ReadControl | null;
  /** An upgrade read after the requests waiting: the connection's last request, handled in its turn. */
  private upgradeRequest: { req: IncomingMessage; head: Buffer } | null = null;

  constructor(
    private readonly listener: ConnectionListener,
    private readonly socket: Socket,
    private readonly handle: RequestHandler,
    private readonly handleUpgrade?: UpgradeHandler,
  ) {
    this.reading = readControl(socket);
    socket.once('close', () => {
      this.ended = true;
      this.waiting.length = 0;
    });
  }

  get closing(): boolean {
    return this.listener.closing;
  }

  /**
   * A request Node parsed; `awaitsContinue` for one that waits for 100 Continue before it sends its
   * body (Node's 'checkContinue': Node has sent nothing, the proxy does once it takes the request).
   */
  request(req: IncomingMessage, res: ServerResponse, awaitsContinue = false): void {
    if (this.ended) return;
    if (!this.active) {
      this.start(req, res, awaitsContinue);
      return;
    }
    this.waiting.push([req, res, awaitsContinue]);
    if (this.waiting.length >= maxWaitingRequests) this.reading?.stop();
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
    if (next) {
      if (this.waiting.length < maxWaitingRequests && !this.fault) this.reading?.start();
      this.start(next[0], next[1], next[2]);
    } else if (this.fault && !this.ended) this.answerFault(this.fault);
    else if (this.upgradeRequest && !this.ended) this.startUpgrade(this.upgradeRequest);
  }

  /**
   * Node let go of the connection for a request asking to upgrade it (its 'upgrade'): the last
   * request of the connection, handled once the requests before it are answered, checked as they are.
   */
  upgrade(req: IncomingMessage, head: Buffer): void {
    // Nothing is read until the upgrade is handled: its bytes wait in the socket.
    this.socket.pause();
    if (this.ended || this.fault || !this.handleUpgrade) {
      this.socket.destroy();
      return;
    }
    this.upgradeRequest = { req, head };
    if (!this.active) this.startUpgrade(this.upgradeRequest);
  }

  private startUpgrade({ req, head }: { req: IncomingMessage; head: Buffer }): void {
    this.ended = true;
    this.upgradeRequest = null;
    this.reading?.start();
    const verdict = checkRequest(req as RequestLine);
    if (!verdict.ok) {
      writeRefusal(this.socket, { status: verdict.status, text: `cutover: ${verdict.reason}\n` });
      this.socket.destroySoon();
      return;
    }
    req.url = verdict.target;
    this.handleUpgrade?.(req, this.socket, head);
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
    // A request whose body the error cut never reached its end: it is not sent upstream.
    const last = this.waiting[this.waiting.length - 1];
    if (last && !last[0].complete) this.waiting.pop();
    if (this.active && !this.active.req.complete) {
      // The error is in the body being streamed upstream: that request cannot be answered.
      this.ended = true;
      const answer = parseErrorRefusal(error);
      if (answer && !this.active.headersSent) writeRefusal(this.socket, answer);
      this.socket.destroy();
      return;
    }
    this.refuse(parseErrorRefusal(error));
  }

  /** A CONNECT followed the requests read so far: answered 400 in its turn. */
  connect(): void {
    if (this.fault || this.ended) return;
    this.refuse(connectRefusal);
  }

  /** Nothing after the requests read so far is served: `answer` goes out after their answers. */
  private refuse(answer: Refusal | null): void {
    this.fault = { answer };
    // Nothing more is read: what follows cannot be framed.
    this.reading?.stop();
    if (!this.active) this.answerFault(this.fault);
  }

  /**
   * The active request is taken and its body is about to be read: 100 Continue now, if its client
   * waits for it. Never for a request refused first (nginx sends none): that client sends no body
   * onto a connection about to close.
   */
  continueRequest(res: ServerResponse): void {
    if (res !== this.active || !this.activeAwaitsContinue) return;
    this.activeAwaitsContinue = false;
    res.writeContinue();
  }

  private start(req: IncomingMessage, res: ServerResponse, awaitsContinue: boolean): void {
    this.active = res;
    this.activeAwaitsContinue = awaitsContinue;
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
    const refusal = { status: verdict.status, text: `cutover: ${verdict.reason}\n` };
    res.writeHead(refusal.status, refusalHeaders(refusal));
    res.end(refusal.text);
  }

  private answerFault(fault: { answer: Refusal | null }): void {
    this.ended = true;
    if (fault.answer) writeRefusal(this.socket, fault.answer);
    this.socket.destroySoon();
  }
}

/**
 * Serves `server`'s requests through one ClientConnection per connection, parse errors included.
 * `connectionEvent`: 'secureConnection' for a server over TLS (its 'connection' is the TCP socket).
 */
export function serveConnections(
  server: Server,
  listener: ConnectionListener,
  handle: RequestHandler,
  handleUpgrade?: UpgradeHandler,
  connectionEvent: 'connection' | 'secureConnection' = 'connection',
): void {
  const clients = new WeakMap<Socket, ClientConnection>();
  server.on(connectionEvent, (socket: Socket) => {
    clients.set(socket, new ClientConnection(listener, socket, handle, handleUpgrade));
  });
  // With this listener Node hands over a request with `Connection: upgrade` and `Upgrade` (and its
  // socket) rather than serving it as a plain request.
  if (handleUpgrade)
    server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
      socket.on('error', () => undefined);
      const client = clients.get(socket);
      if (client) client.upgrade(req, head);
      else socket.destroy();
    });
  server.on('request', (req: IncomingMessage, res: ServerResponse) =>
    clients.get(req.socket)?.request(req, res),
  );
  // With this listener Node no longer sends 100 Continue as soon as it parses the head, before the
  // request is checked (a refused client then sent its body onto a closing connection).
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) =>
    clients.get(req.socket)?.request(req, res, true),
  );
  // Without a listener Node drops a CONNECT's connection unanswered; nginx answers 400. Node emits
  // it as soon as it parsed it, ahead of the answers to the requests before it.
  server.on('connect', (_req: IncomingMessage, socket: Socket) => {
    // Node took its own error listener off the socket with the parser.
    socket.on('error', () => undefined);
    const client = clients.get(socket);
    if (client) return client.connect();
    writeRefusal(socket, connectRefusal);
    socket.destroySoon();
  });
  // Handled here, Node writes no answer of its own (its default would go ahead of earlier answers).
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    const client = clients.get(socket);
    if (client) return client.clientError(error);
    const answer = isParseError(error) ? parseErrorRefusal(error) : null;
    if (answer) writeRefusal(socket, answer);
    socket.destroy();
  });
}

/** Node reports a request it could not read (llhttp's HPE_ codes, its timeouts), not a socket error. */
export function isParseError(error: NodeJS.ErrnoException): boolean {
  return error.code?.startsWith('HPE_') === true || error.code === 'ERR_HTTP_REQUEST_TIMEOUT';
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
 * Writes `refusal` on the socket itself, where there is no response object (a parse error, a
 * CONNECT); nothing once the socket cannot take it.
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

/**
 * The answer to a request Node could not parse, naming the fault; none for bytes after a request
 * that closed the connection (nginx ignores them too).
 */
function parseErrorRefusal(error: NodeJS.ErrnoException): Refusal | null {
  if (error.code === 'HPE_CLOSED_CONNECTION') return null;
  return {
    status: clientErrorStatus(error.code),
    text: `cutover: malformed request: ${clientErrorReason(error)}\n`,
  };
}

function clientErrorStatus(code: string | undefined): number {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return 431;
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return 408;
    default:
      return 400;
  }
}

/** llhttp's reason ("Invalid header value char"), else the error's message; one line. */
function clientErrorReason(error: NodeJS.ErrnoException): string {
  const reason = (error as { reason?: unknown }).reason;
  const text = typeof reason === 'string' && reason !== '' ? reason : error.message;
  return text.replace(/[^\x20-\x7e]+/g, ' ').slice(0, 200);
}
