/**
 * One request to one upstream address, as the router's HTTP/1.1 client carries it (the client:
 * upstream-pool.ts): what the proxy writes, what it is told back, and what is known when it fails.
 */
import type { Socket } from 'node:net';
import type { RequestBodyFraming } from './body-framing.js';
import type { RawHeaders } from './forward-headers.js';

/** What is known about an upstream request that failed before its response ended. */
export interface UpstreamFailure {
  method: string;
  code: string | undefined;
  /**
   * Some of the request may have reached the upstream: its head was handed to a connection that
   * was up, and the kernel did not refuse it. False only with proof that no byte went out: the
   * connection never came up, or writing the head failed (a reused connection the upstream had
   * closed or reset). A request sent on a connection the upstream was closing at that very moment
   * counts as sent: nothing tells it apart from one the upstream read and then dropped.
   */
  requestSent: boolean;
  /**
   * A connection that had sat idle (kept alive, or opened ahead) refused the request: the upstream
   * had closed it, which says nothing about the address, so another connection to it may carry it.
   */
  staleConnection: boolean;
  /** Bytes of a response arrived on the connection. */
  receivedBytes: boolean;
}

/** What happens to one request on its way: the proxy's side of an exchange. */
export interface ExchangeHandler {
  /**
   * The connection is up: the request body may be sent now. Only for a request with a body, and not
   * for one whose body went with its head (`UpstreamExchange.inlineBody`).
   */
  upstreamConnected(): void;
  /** The final response's head (interim 1xx responses are skipped). */
  upstreamHead(status: number, reason: string, headers: RawHeaders): void;
  /**
   * A piece of the response body, the last with `last` (possibly empty). Answer false when the
   * client cannot take more now: reading stops until `exchange.resume()`.
   */
  upstreamBody(chunk: Buffer, last: boolean): boolean;
  /** The request failed before its response ended; nothing more is called after this. */
  upstreamFailed(failure: UpstreamFailure, error: Error): void;
}

/** What an exchange needs of the connection carrying it (upstream-connection.ts). */
export interface ExchangeCarrier {
  readonly socket: Socket;
  /** When the upstream last sent a byte, or the request was sent (for the silence timeout). */
  lastHeard: number;
  /** The client can take more of the response body: reading goes on. */
  resume(): void;
}

/** Where an exchange waits for a free connection (its pool). */
export interface ExchangeQueue {
  dequeue(exchange: UpstreamExchange): void;
}

/** One request to one upstream address: written by the proxy, carried by a pooled connection. */
export class UpstreamExchange {
  /** The connection carrying it, once it has one. */
  connection: ExchangeCarrier | null = null;
  /** Sent to the end (a request without a body is, once its head is written). */
  requestEnded: boolean;
  receivedBytes = false;
  /** Writing the head failed: no byte of this request left the router. */
  headRefused = false;
  /** Answered, failed or aborted: nothing more happens. */
  done = false;
  /** Waiting for a free connection in this pool, since `queuedAt`. */
  queuedIn: ExchangeQueue | null = null;
  queuedAt = 0;
  /** Its body is still coming from the client when it is sent: it counts to `streamedBodyMaxSockets`. */
  streamedBody = false;
  /**
   * Its whole body, when it is small and read before the request is sent (Content-Length framing):
   * on a connection that is up, the head and this body go out in one write, one system call (as
   * nginx's one writev), and `upstreamConnected` is not called. On a connection still opening, the
   * body goes as any other, once it is up.
   */
  inlineBody: Buffer | null = null;

  constructor(
    readonly method: string,
    /** The request line and header fields, ending with the empty line. */
    readonly head: string,
    readonly body: RequestBodyFraming,
    readonly handler: ExchangeHandler,
    /** Longest silence of the upstream once the request was sent, while its answer is awaited. */
    readonly silenceTimeoutMs: number,
    /** Longest wait for a free connection when all of them are busy. */
    readonly queueTimeoutMs: number,
  ) {
    this.requestEnded = body === 'none';
  }

  /** The body can no longer be sent (the exchange is over, or its connection is gone). */
  get destroyed(): boolean {
    return this.done || this.connection === null || this.connection.socket.destroyed;
  }

  /** Sends a piece of the request body; false when the connection's buffer is full (see onceDrain). */
  write(chunk: Buffer): boolean {
    const socket = this.connection?.socket;
    if (this.done || !socket || chunk.length === 0) return true;
    if (this.body !== 'chunked') return socket.write(chunk);
    socket.cork();
    socket.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
    socket.write(chunk);
    const more = socket.write('\r\n', 'latin1');
    socket.uncork();
    return more;
  }

  end(): void {
    if (this.requestEnded || this.done) return;
    this.requestEnded = true;
    if (this.body === 'chunked') this.connection?.socket.write('0\r\n\r\n', 'latin1');
    // The upstream's silence counts from here: before, it may be waiting for the body.
    if (this.connection) this.connection.lastHeard = Date.now();
  }

  onceDrain(listener: () => void): void {
    this.connection?.socket.once('drain', listener);
  }

  /** The client can take more of the response body. */
  resume(): void {
    if (!this.done) this.connection?.resume();
  }

  /** The client went away: stop, and close the connection if it carries this request. */
  abort(): void {
    if (this.done) return;
    this.done = true;
    if (this.queuedIn) this.queuedIn.dequeue(this);
    this.connection?.socket.destroy();
  }
}
