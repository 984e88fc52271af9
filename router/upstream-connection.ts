/**
 * One keep-alive connection from the router's HTTP/1.1 client (upstream-pool.ts) to an upstream,
 * over a plain socket, reading its responses with ResponseParser (http1-response.ts).
 *
 * Invariant: a connection carries one request at a time (no pipelining): any byte that arrives
 * when no response is expected, or after the expected one ended, closes the connection.
 */
import { connect, type Socket } from 'node:net';
import type { RawHeaders } from './forward-headers.js';
import { ResponseParser, type ResponseSink } from './http1-response.js';
import type { UpstreamExchange } from './upstream-exchange.js';

/** An upstream that has not accepted a connection within this long counts as refusing it. */
export const upstreamConnectTimeoutMs = 5_000;

export type ConnectionState = 'busy' | 'idle' | 'opening-spare' | 'spare' | 'closed';

/** What a connection tells the pool that owns it (upstream-pool.ts). */
export interface ConnectionOwner {
  /** A spare connection is up. */
  spareReady(connection: UpstreamConnection): void;
  /** The connection finished its exchange and may carry another. */
  release(connection: UpstreamConnection): void;
  /** The connection's socket closed. */
  closed(connection: UpstreamConnection): void;
}

/** One keep-alive connection to an upstream. */
export class UpstreamConnection implements ResponseSink {
  readonly socket: Socket;
  private readonly parser = new ResponseParser(this);
  exchange: UpstreamExchange | null = null;
  state: ConnectionState;
  /** It carries an exchange with a streamed body, counted by its pool until it is released or closed. */
  streamsBody = false;
  connected = false;
  /** Requests whose response was read to the end on this connection. */
  served = 0;
  readonly openedAsSpare: boolean;
  /** When it became idle, or was opened as a spare. */
  since = 0;
  /** When the upstream last sent a byte, or the request was sent (for the silence timeout). */
  lastHeard = 0;
  private paused = false;
  private error: NodeJS.ErrnoException | null = null;
  private connectTimer: NodeJS.Timeout | null;
  /**
   * The write callback of every request head on this connection (one function per connection, not
   * per request). Node calls it with an error before the socket's 'close' when the kernel refused
   * the bytes, and the exchange is still this connection's then: one request at a time.
   */
  private readonly headWritten = (error?: Error | null): void => {
    if (error && this.exchange) this.exchange.headRefused = true;
  };

  constructor(
    private readonly pool: ConnectionOwner,
    host: string,
    port: number,
    spare: boolean,
  ) {
    this.openedAsSpare = spare;
    this.state = spare ? 'opening-spare' : 'busy';
    const socket = connect({ host, port, noDelay: true, keepAlive: true });
    this.socket = socket;
    socket.on('connect', () => this.onConnect());
    socket.on('data', (data: Buffer) => this.onData(data));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      this.error ??= error;
    });
    socket.on('close', () => this.onClose());
    this.connectTimer = setTimeout(() => {
      const error: NodeJS.ErrnoException = new Error(`connect to ${host}:${port} timed out`);
      error.code = 'ETIMEDOUT';
      socket.destroy(error);
    }, upstreamConnectTimeoutMs);
  }

  /** Sends `exchange`'s head on this connection and makes it the one whose response is read. */
  carry(exchange: UpstreamExchange): void {
    this.state = 'busy';
    this.exchange = exchange;
    exchange.connection = this;
    this.resume();
    this.lastHeard = Date.now();
    this.socket.ref();
    this.parser.expect(exchange.method === 'HEAD');
    const inline = this.connected ? exchange.inlineBody : null;
    if (inline !== null) {
      // Byte for byte: latin1 maps each byte to one character and back.
      this.socket.write(exchange.head + inline.toString('latin1'), 'latin1', this.headWritten);
      exchange.end();
      return;
    }
    this.socket.write(exchange.head, 'latin1', this.headWritten);
    if (this.connected && !exchange.requestEnded) exchange.handler.upstreamConnected();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    // Time spent paused for a slow client is not the upstream's silence.
    this.lastHeard = Date.now();
    this.socket.resume();
  }

  /**
   * Ends the exchange when the upstream has sent nothing for its timeout, counted once the request
   * was sent and not while reading is paused for a slow client. Called by the pool's timer.
   */
  checkSilence(now: number): void {
    const exchange = this.exchange;
    if (!exchange || exchange.done || !exchange.requestEnded || this.paused) return;
    if (now - this.lastHeard < exchange.silenceTimeoutMs) return;
    const seconds = exchange.silenceTimeoutMs / 1000;
    const error: NodeJS.ErrnoException = new Error(`the upstream sent nothing for ${seconds}s`);
    error.code = 'ETIMEDOUT';
    this.socket.destroy(error);
  }

  /** Waits for the next request, not keeping the process alive meanwhile. */
  rest(now: number): void {
    this.state = this.openedAsSpare && this.served === 0 ? 'spare' : 'idle';
    this.since = now;
    this.resume();
    this.socket.unref();
  }

  responseHead(status: number, reason: string, headers: RawHeaders): void {
    this.exchange?.handler.upstreamHead(status, reason, headers);
  }

  responseBody(chunk: Buffer, last: boolean): void {
    const exchange = this.exchange;
    if (!exchange || exchange.done) return;
    if (!exchange.handler.upstreamBody(chunk, last) && !last && !this.paused) {
      this.paused = true;
      this.socket.pause();
    }
  }

  private onConnect(): void {
    this.connected = true;
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.connectTimer = null;
    if (this.state === 'opening-spare') {
      this.pool.spareReady(this);
      return;
    }
    const exchange = this.exchange;
    if (exchange && !exchange.done && !exchange.requestEnded) exchange.handler.upstreamConnected();
  }

  private onData(data: Buffer): void {
    const exchange = this.exchange;
    if (!exchange) {
      // Nothing was asked on this connection (idle or spare): not a connection to trust.
      this.socket.destroy();
      return;
    }
    exchange.receivedBytes = true;
    this.lastHeard = Date.now();
    try {
      this.parser.execute(data);
    } catch (error) {
      this.socket.destroy(error as Error);
      return;
    }
    if (this.parser.complete) this.finish(exchange);
  }

  /**
   * The response was read to its end. The exchange lets go of the connection (a late 'drain' of its
   * client must not resume the next exchange's), which reading resumes for whoever comes next.
   */
  private finish(exchange: UpstreamExchange): void {
    this.exchange = null;
    this.served++;
    const aborted = exchange.done;
    exchange.done = true;
    exchange.connection = null;
    this.resume();
    if (!aborted && exchange.requestEnded && this.parser.keepAlive) this.pool.release(this);
    else this.socket.destroy();
  }

  private onClose(): void {
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.connectTimer = null;
    const exchange = this.exchange;
    // A body delimited by the close ends here (parser.end reports it as the last piece).
    const complete = exchange !== null && this.error === null && this.parser.headRead && this.parser.end();
    this.exchange = null;
    this.pool.closed(this);
    this.state = 'closed';
    if (!exchange || exchange.done) return;
    exchange.done = true;
    if (complete) return;
    const error = this.error ?? Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    exchange.handler.upstreamFailed(
      {
        method: exchange.method,
        code: (error as NodeJS.ErrnoException).code,
        requestSent: this.connected && !exchange.headRefused,
        staleConnection: exchange.headRefused && (this.served > 0 || this.openedAsSpare),
        receivedBytes: exchange.receivedBytes,
      },
      error,
    );
  }
}
