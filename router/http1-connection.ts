/**
 * One client connection of a route listener, read by the router itself (request-head.ts,
 * chunked-request-body.ts) rather than by Node's HTTP server: Node's server, with its
 * IncomingMessage, ServerResponse, their streams and its keep-alive timers, cost 11–16 µs of CPU per
 * request (docs/performance.md).
 *
 * As nginx serves a connection, and as the router did on Node's server before: one
 * request at a time, in the order they came. The next head is not even parsed before the response
 * to the one before is over; bytes read ahead wait (at most `readAheadBytes`, then the socket is
 * not read: TCP holds the client back). So the upstream sees pipelined requests in order, each after
 * the one before was answered, a request is never sent upstream once the connection is to close,
 * and a malformed head is answered after every answer before it.
 *
 * Invariants: at most one request (`active`) is being answered; its body goes to it as it comes,
 * no faster than it takes it (past `readAheadBytes` kept for it, the socket is not read). A head
 * refused, a body whose framing breaks, or a response that closes the connection end it: nothing
 * after is read. Timers: while no request is being answered, the head has `headTimeoutMs` to come
 * whole (408 after), and an idle connection is closed after the keep-alive timeout.
 */
import type { Socket } from 'node:net';
import { ChunkedDecoder } from './chunked-request-body.js';
import { type ExchangeConnection, Http1Request, Http1Response } from './http1-exchange.js';
import { type Refusal, refusalHeaders, writeRefusal } from './refusals.js';
import { checkRequest, type RequestLine } from './request-checks.js';
import { type RequestHead, RequestHeadParser } from './request-head.js';

/** Bytes read and kept ahead of what the active request takes, before the socket is not read. */
export const readAheadBytes = 64 * 1024;
/**
 * How long a request head has to come whole, from the connection's start or the first byte after
 * the one before: Node's headersTimeout, which the router had (nginx's client_header_timeout is 60 s too).
 */
export const headTimeoutMs = 60_000;
/**
 * How long a request's head and body have to come whole: Node's requestTimeout, which the router
 * had (a body trickled just fast enough for the route's bodyTimeout is not read for ever).
 */
export const requestTimeoutMs = 300_000;

/** What a connection needs of its server and listener. */
export interface Http1ServerSide {
  /** The listener is going away: answers say Connection: close. */
  readonly closing: boolean;
  readonly keepAliveTimeoutMs: number;
  date(): string;
  /** A response of this listener is over. */
  responseClosed(): void;
  /** Proxies one request; the handler calls `connection.responseClosed()` once its response is over. */
  handle(connection: Http1Connection, req: Http1Request, res: Http1Response): void;
  /** Proxies a request that upgrades its connection; the socket is its from now on. */
  handleUpgrade?(req: Http1Request, socket: Socket, head: Buffer): void;
  /** The connection is over. */
  forget(connection: Http1Connection): void;
}

/** CONNECT tunnels nothing here: nginx answers it 400 too. */
const connectRefusal: Refusal = { status: 400, text: 'cutover: CONNECT is not supported\n' };

/** Node's reading of an Expect the server meets (its `continueExpression`). */
const continueExpectation = /(?:^|\W)100-continue(?:$|\W)/i;

export class Http1Connection implements ExchangeConnection {
  private buffer: Buffer | null = null;
  /** Where the unread bytes of `buffer` start. */
  private offset = 0;
  private readonly parser = new RequestHeadParser();
  private active: { req: Http1Request; res: Http1Response; awaitsContinue: boolean } | null = null;
  /** The active request's body still to come: bytes of a Content-Length, or a chunked decoder. */
  private lengthLeft = 0;
  private chunked: ChunkedDecoder | null = null;
  /** No request is handled any more: the connection closes (or closed). */
  private ended = false;
  /** The socket is not read (read-ahead or a body's listener behind). */
  private held = false;
  /** What the connection waits for while no request is answered, timed: a head, or nothing (idle). */
  private waiting: 'head' | 'idle' | 'nothing' = 'head';
  private headTimer: NodeJS.Timeout | null = null;
  private idleTimer: NodeJS.Timeout | null = null;
  /** Runs while the active request's body is still to come (requestTimeoutMs). */
  private bodyTimer: NodeJS.Timeout | null = null;
  /** The socket went to an upgrade (handleUpgrade): its owner closes it, not this connection. */
  handedOver = false;
  readonly keepAliveSeconds: number;

  constructor(
    readonly socket: Socket,
    private readonly side: Http1ServerSide,
  ) {
    this.keepAliveSeconds = Math.floor(side.keepAliveTimeoutMs / 1000);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('drain', () => this.active?.res.emit('drain'));
    socket.on('error', () => socket.destroy());
    socket.once('close', () => this.closed());
    this.timeHead();
  }

  get closing(): boolean {
    return this.side.closing;
  }

  date(): string {
    return this.side.date();
  }

  /**
   * Closes the connection if it is between requests with nothing read (a closing listener's). A
   * socket handed over to an upgrade is not this connection's to close (a tunnel gets a close frame).
   */
  closeIfIdle(): void {
    if (!this.active && !this.handedOver && this.unread() === 0) this.socket.destroy();
  }

  /** The active request is taken and its body about to be read: 100 Continue now, if its client waits. */
  continueRequest(res: Http1Response): void {
    const active = this.active;
    if (!active || active.res !== res || !active.awaitsContinue) return;
    active.awaitsContinue = false;
    res.writeContinue();
  }

  /** The active request's body is wanted: what waits goes to its listener, and reading resumes. */
  bodyWanted(): void {
    const active = this.active;
    if (!active) return;
    active.req.flush();
    if (this.held && active.req.queuedBytes < readAheadBytes && this.unread() < readAheadBytes)
      this.hold(false);
  }

  /** The active request's response is over: the next request may be read. */
  responseClosed(): void {
    const finished = this.active;
    this.active = null;
    this.side.responseClosed();
    if (this.ended) return;
    // A response that closes the connection is its last; so is one to a request not read to its
    // end (what follows cannot be framed); nor is a request read for a client already gone.
    if (
      !finished?.res.shouldKeepAlive ||
      !finished.req.complete ||
      this.socket.writableEnded ||
      this.socket.destroyed
    ) {
      this.end();
      return;
    }
    if (this.held) this.hold(false);
    if (this.unread() > 0) {
      this.timeHead();
      this.parse();
    } else this.timeIdle();
  }

  private read(chunk: Buffer): void {
    if (this.ended) return;
    if (this.buffer === null || this.offset >= this.buffer.length) {
      this.buffer = chunk;
      this.offset = 0;
    } else {
      this.buffer = Buffer.concat([this.buffer.subarray(this.offset), chunk]);
      this.offset = 0;
    }
    const active = this.active;
    if (active) {
      if (!active.req.complete) this.readBody(active.req);
      if (!this.ended && this.unread() >= readAheadBytes) this.hold(true);
      return;
    }
    if (this.waiting === 'idle') this.timeHead();
    this.parse();
  }

  private unread(): number {
    return this.buffer === null ? 0 : this.buffer.length - this.offset;
  }

  /** Reads heads while no request is being answered. */
  private parse(): void {
    const buffer = this.buffer;
    if (buffer === null || this.ended || this.active) return;
    const result = this.parser.read(buffer, this.offset);
    if (result.kind === 'partial') return;
    if (result.kind === 'refused') {
      this.refuse({
        status: result.refusal.status,
        text: `cutover: malformed request: ${result.refusal.reason}\n`,
      });
      return;
    }
    this.offset = result.end;
    this.startRequest(result.head);
    if (!this.ended && this.active && this.unread() >= readAheadBytes) this.hold(true);
  }

  private startRequest(head: RequestHead): void {
    this.waiting = 'nothing';
    const req = new Http1Request(head, this.socket, this);
    if (head.upgrade) {
      if (head.method === 'CONNECT' || !this.side.handleUpgrade) this.refuse(connectRefusal);
      else this.startUpgrade(req);
      return;
    }
    const res = new Http1Response(req, this, head.keepAlive);
    let awaitsContinue = false;
    if (head.expect !== null) {
      if (!continueExpectation.test(head.expect)) {
        this.refuse({
          status: 417,
          text: `cutover: the expectation ${JSON.stringify(head.expect)} is not met\n`,
        });
        return;
      }
      awaitsContinue = true;
    }
    this.active = { req, res, awaitsContinue };
    if (head.body.kind === 'length') this.lengthLeft = head.body.bytes;
    else if (head.body.kind === 'chunked') this.chunked = new ChunkedDecoder();
    // Body bytes that came with the head go to the request before it is handled (they wait in it).
    if (!req.complete) {
      this.bodyTimer = setTimeout(
        () => this.bodyFault('the request did not come whole in time', 408),
        requestTimeoutMs,
      );
      this.readBody(req);
    }
    if (this.ended) return;
    const verdict = checkRequest(req as RequestLine);
    if (!verdict.ok) {
      // Refused before anything went upstream; the connection closes, as nginx's does after a 4xx
      // or 5xx of its own (what follows may be the refused request's body).
      res.once('close', () => this.responseClosed());
      res.shouldKeepAlive = false;
      const text = `cutover: ${verdict.reason}\n`;
      res.writeHead(verdict.status, refusalHeaders({ status: verdict.status, text }));
      res.end(text);
      return;
    }
    req.url = verdict.target;
    this.side.handle(this, req, res);
  }

  /** Body bytes read so far go to the active request; its end, or its framing's fault, is noted. */
  private readBody(req: Http1Request): void {
    const buffer = this.buffer;
    if (buffer === null) return;
    const decoder = this.chunked;
    if (decoder === null) {
      const take = Math.min(this.lengthLeft, buffer.length - this.offset);
      if (take > 0) req.push(buffer.subarray(this.offset, this.offset + take));
      this.offset += take;
      this.lengthLeft -= take;
      if (this.lengthLeft === 0) this.bodyComplete(req);
    } else {
      const start = this.offset;
      const read = decoder.read(buffer, start, buffer.length, (from, to) =>
        req.push(buffer.subarray(from, to)),
      );
      if (read.error !== null) {
        this.bodyFault(read.error);
        return;
      }
      this.offset = start + read.used;
      if (read.done) {
        this.chunked = null;
        this.bodyComplete(req);
      }
    }
    if (req.queuedBytes >= readAheadBytes) this.hold(true);
  }

  private bodyComplete(req: Http1Request): void {
    if (this.bodyTimer) clearTimeout(this.bodyTimer);
    this.bodyTimer = null;
    req.complete = true;
    req.flush();
  }

  /**
   * The body being read broke its framing: that request cannot be answered (its upstream, if it
   * went, never sees a body end). The client hears why, unless its answer began.
   */
  private bodyFault(reason: string, status = 400): void {
    const active = this.active;
    if (this.ended) return;
    this.ended = true;
    this.stopTimers();
    if (active && !active.res.headersSent)
      writeRefusal(this.socket, { status, text: `cutover: malformed request: ${reason}\n` });
    this.socket.destroy();
  }

  /** Answers `refusal` and closes: nothing after is read. */
  private refuse(refusal: Refusal): void {
    this.ended = true;
    this.stopTimers();
    writeRefusal(this.socket, refusal);
    this.socket.destroySoon();
  }

  /**
   * The socket is the upgrade's from now on: this connection reads nothing more, and what came
   * after the head goes with the request. Checked as any request first.
   */
  private startUpgrade(req: Http1Request): void {
    this.ended = true;
    this.stopTimers();
    const socket = this.socket;
    socket.removeAllListeners('data');
    socket.removeAllListeners('drain');
    socket.pause();
    const buffer = this.buffer;
    const head = buffer === null ? Buffer.alloc(0) : buffer.subarray(this.offset);
    this.buffer = null;
    const verdict = checkRequest(req as RequestLine);
    if (!verdict.ok) {
      writeRefusal(socket, { status: verdict.status, text: `cutover: ${verdict.reason}\n` });
      socket.destroySoon();
      return;
    }
    req.url = verdict.target;
    this.handedOver = true;
    this.side.handleUpgrade?.(req, socket, head);
  }

  private hold(stop: boolean): void {
    if (stop === this.held) return;
    this.held = stop;
    if (stop) this.socket.pause();
    else this.socket.resume();
  }

  private end(): void {
    this.ended = true;
    this.stopTimers();
    this.socket.destroySoon();
  }

  private closed(): void {
    this.ended = true;
    this.stopTimers();
    this.side.forget(this);
    const active = this.active;
    if (active) active.res.socketClosed();
  }

  /** A head is due: 408 unless it comes whole within headTimeoutMs. */
  private timeHead(): void {
    this.waiting = 'head';
    if (this.headTimer) this.headTimer.refresh();
    else this.headTimer = setTimeout(() => this.headTimedOut(), headTimeoutMs);
  }

  /** Between requests, nothing read: closed after the keep-alive timeout. */
  private timeIdle(): void {
    this.waiting = 'idle';
    if (this.idleTimer) this.idleTimer.refresh();
    else this.idleTimer = setTimeout(() => this.idleTimedOut(), this.side.keepAliveTimeoutMs);
  }

  private stopTimers(): void {
    this.waiting = 'nothing';
    if (this.headTimer) clearTimeout(this.headTimer);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    if (this.bodyTimer) clearTimeout(this.bodyTimer);
    this.headTimer = null;
    this.idleTimer = null;
    this.bodyTimer = null;
  }

  private headTimedOut(): void {
    if (this.waiting !== 'head' || this.ended) return;
    // Bytes waiting in the kernel are read first: a head that just came whole is served.
    const read = this.socket.bytesRead;
    setImmediate(() => {
      if (this.waiting !== 'head' || this.ended || this.socket.bytesRead !== read) return;
      this.refuse({
        status: 408,
        text: 'cutover: malformed request: the request head did not come in time\n',
      });
    });
  }

  /**
   * The keep-alive timeout fell due. The timer runs in the loop's timers phase, before the loop
   * reads what came meanwhile: a request the client sent just before (the router loaded, its timer
   * late) would be reset unanswered. The close waits one turn of the loop; a byte read by then
   * keeps the connection.
   */
  private idleTimedOut(): void {
    if (this.waiting !== 'idle' || this.ended) return;
    const read = this.socket.bytesRead;
    setImmediate(() => {
      if (this.waiting === 'idle' && !this.ended && this.socket.bytesRead === read) this.socket.destroy();
    });
  }
}
