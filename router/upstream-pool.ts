/**
 * The router's HTTP/1.1 client: per upstream address, a pool of keep-alive connections over plain
 * sockets, each reading its responses with ResponseParser (http1-response.ts).
 *
 * Why not Node's http.request and Agent: on the router's hot path they cost about as much CPU as
 * Node's HTTP server itself (a ClientRequest, an IncomingMessage, header objects and events per
 * request). This client writes each request head as one string and hands response bytes straight
 * to the proxy, and it knows what the proxy's failover rules need: whether any byte of the request
 * can have reached the upstream, and whether any response byte came back (proxy-request.ts
 * `mayRetry`).
 *
 * Invariants:
 * - A connection carries one request at a time (no pipelining): any byte that arrives when no
 *   response is expected, or after the expected one ended, closes the connection.
 * - A connection goes back to the pool only when its response was read to the end, the request was
 *   sent to the end, and the response allowed keep-alive; otherwise it is closed.
 * - At most `upstreamMaxSockets` connections per address carry requests, and of those at most
 *   `streamedBodyMaxSockets` carry a request whose body is still coming from the client; more
 *   requests wait in order for one to be free, each at most its route's queueTimeout (checked by
 *   the pool's timer).
 */
import { connect, type Socket } from 'node:net';
import { parseHostPort } from '../core/host-port.js';
import type { RequestBodyFraming } from './body-framing.js';
import type { RawHeaders } from './forward-headers.js';
import { ResponseParser, type ResponseSink } from './http1-response.js';

/** Connections to one upstream address that carry requests at most; more requests queue. */
export const upstreamMaxSockets = 256;
/**
 * Connections to one upstream address that carry a streamed request body (one larger than the
 * router buffers, replayable-body.ts) at most. Such a body comes at the client's pace and holds its
 * connection meanwhile: a quarter of the connections may be held so, and the rest stay for
 * requests the router has read whole, which a slow client cannot hold. More streamed bodies queue.
 */
export const streamedBodyMaxSockets = upstreamMaxSockets / 4;
/** Idle keep-alive connections kept per upstream address. */
export const upstreamMaxIdleSockets = 64;
/**
 * An idle upstream connection is closed after at most this long: below Node's default server
 * keepAliveTimeout (5 s), so the router rarely reuses a connection the upstream is closing.
 */
export const upstreamIdleSocketTimeoutMs = 4_000;
/** An upstream that has not accepted a connection within this long counts as refusing it. */
export const upstreamConnectTimeoutMs = 5_000;
/**
 * Connections kept ready to every blue address of the table, even while blue takes no traffic:
 * idle keep-alive connections, or else spare connections opened ahead (no request sent on them).
 * A rollback sends blue, which sat at 0% while green served, all of the traffic at once; without
 * them, its first requests would each wait for a new connection while the machine is busiest.
 * (Green needs none: the health gate reaches it before traffic moves, and after a rollback it goes.)
 */
export const upstreamWarmConnections = 4;
/** How often idle connections are closed and the warm ones topped up. */
export const upstreamMaintenanceIntervalMs = 500;
/**
 * A spare connection is replaced after this long: servers close connections on which no request
 * came within a while (nginx after 60 s), and a spare must be gone from the pool before that.
 */
export const upstreamSpareMaxAgeMs = 20_000;

/**
 * The failure code of a request that waited the route's queueTimeout for a connection: every
 * connection to its upstream stayed busy. The request never left the router.
 */
export const queueTimeoutCode = 'ECUTOVERQUEUE';

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
  /** The connection is up: the request body may be sent now. Only for a request with a body. */
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

/** One request to one upstream address: written by the proxy, carried by a pooled connection. */
export class UpstreamExchange {
  /** The connection carrying it, once it has one. */
  connection: UpstreamConnection | null = null;
  /** Sent to the end (a request without a body is, once its head is written). */
  requestEnded: boolean;
  receivedBytes = false;
  /** Writing the head failed: no byte of this request left the router. */
  headRefused = false;
  /** Answered, failed or aborted: nothing more happens. */
  done = false;
  /** Waiting for a free connection in this pool, since `queuedAt`. */
  queuedIn: UpstreamPool | null = null;
  queuedAt = 0;
  /** Its body is still coming from the client when it is sent: it counts to `streamedBodyMaxSockets`. */
  streamedBody = false;

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

type ConnectionState = 'busy' | 'idle' | 'opening-spare' | 'spare' | 'closed';

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
    private readonly pool: UpstreamPool,
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

/** The failure of a request that never left the router: it may go to another upstream. */
function notSent(method: string, code: string): UpstreamFailure {
  return { method, code, requestSent: false, staleConnection: false, receivedBytes: false };
}

/** The connections to one upstream address. */
export class UpstreamPool {
  /** Idle keep-alive connections, oldest first; the newest is reused first. */
  private idle: UpstreamConnection[] = [];
  /** Connections opened ahead, nothing sent on them yet, oldest first. */
  private spares: UpstreamConnection[] = [];
  /** Spares still connecting. */
  private readonly openingSpares = new Set<UpstreamConnection>();
  /** Connections carrying a request (or opened for one). */
  private readonly busy = new Set<UpstreamConnection>();
  /** Busy connections carrying a streamed body (`streamsBody`). */
  private streaming = 0;
  private destroyed = false;
  /** Requests waiting for a connection, in order: those read whole, and those with a streamed body. */
  private waiting: UpstreamExchange[] = [];
  private waitingStreamed: UpstreamExchange[] = [];
  private readonly target: { host: string; port: number } | null;

  constructor(readonly address: string) {
    this.target = parseHostPort(address);
  }

  /** Sends `exchange` on a free connection: kept alive, opened ahead, or new; else it waits. */
  send(exchange: UpstreamExchange): void {
    if (exchange.streamedBody && this.streaming >= streamedBodyMaxSockets) {
      this.enqueue(exchange);
      return;
    }
    const kept = this.takeUsable(this.idle) ?? this.takeUsable(this.spares);
    if (kept) {
      this.busy.add(kept);
      this.carry(kept, exchange);
    } else if (this.busy.size < upstreamMaxSockets) {
      const fresh = this.open(false);
      if (fresh) this.carry(fresh, exchange);
      else
        queueMicrotask(() => {
          exchange.done = true;
          const error = Object.assign(new Error(`${this.address} is not host:port`), { code: 'EINVAL' });
          exchange.handler.upstreamFailed(notSent(exchange.method, 'EINVAL'), error);
        });
    } else this.enqueue(exchange);
  }

  /** A connection finished its exchange and may carry another. */
  release(connection: UpstreamConnection): void {
    this.stopCounting(connection);
    const next = this.nextWaiting();
    if (next) {
      this.carry(connection, next);
      return;
    }
    this.busy.delete(connection);
    if (this.idle.length >= upstreamMaxIdleSockets) {
      connection.state = 'closed';
      connection.socket.destroy();
      return;
    }
    connection.rest(Date.now());
    this.idle.push(connection);
  }

  /** @internal A connection's socket closed: forget it, and open another for a waiting request. */
  closed(connection: UpstreamConnection): void {
    switch (connection.state) {
      case 'busy':
        this.stopCounting(connection);
        this.busy.delete(connection);
        break;
      case 'idle':
        this.idle = this.idle.filter((c) => c !== connection);
        break;
      case 'spare':
        this.spares = this.spares.filter((c) => c !== connection);
        break;
      case 'opening-spare':
        this.openingSpares.delete(connection);
        break;
      case 'closed':
        break;
      default: {
        const never: never = connection.state;
        throw new Error(`unknown connection state ${String(never)}`);
      }
    }
    connection.state = 'closed';
    const next = this.busy.size < upstreamMaxSockets ? this.nextWaiting() : undefined;
    if (next) this.send(next);
  }

  /** @internal A spare connection is up. */
  spareReady(connection: UpstreamConnection): void {
    this.openingSpares.delete(connection);
    if (this.destroyed) {
      this.drop(connection);
      return;
    }
    connection.rest(Date.now());
    this.spares.push(connection);
  }

  dequeue(exchange: UpstreamExchange): void {
    const queue = exchange.streamedBody ? this.waitingStreamed : this.waiting;
    const index = queue.indexOf(exchange);
    if (index >= 0) queue.splice(index, 1);
    exchange.queuedIn = null;
  }

  /**
   * Closes connections idle too long, spares too old, and those whose upstream went silent; fails
   * requests that waited their queueTimeout for a connection.
   */
  closeStale(now: number): void {
    for (const connection of this.busy) connection.checkSilence(now);
    const [waiting, expired] = splitExpired(this.waiting, now);
    const [waitingStreamed, expiredStreamed] = splitExpired(this.waitingStreamed, now);
    // The queues are whole again before any handler runs (one may send another request here).
    this.waiting = waiting;
    this.waitingStreamed = waitingStreamed;
    for (const exchange of expired) this.giveUpWaiting(exchange);
    for (const exchange of expiredStreamed) this.giveUpWaiting(exchange);
    // Checked every interval: closing at (timeout - interval) keeps every idle time under the timeout.
    const idleLimit = upstreamIdleSocketTimeoutMs - upstreamMaintenanceIntervalMs;
    while (this.idle.length > 0 && now - (this.idle[0] as UpstreamConnection).since >= idleLimit)
      this.drop(this.idle.shift() as UpstreamConnection);
    while (
      this.spares.length > 0 &&
      now - (this.spares[0] as UpstreamConnection).since >= upstreamSpareMaxAgeMs
    )
      this.drop(this.spares.shift() as UpstreamConnection);
  }

  /** Opens spares until `count` connections are ready (idle or spare). One with requests on it warms itself. */
  keepWarm(count: number): void {
    if (this.busy.size > 0 || this.destroyed) return;
    for (
      let ready = this.idle.length + this.spares.length + this.openingSpares.size;
      ready < count;
      ready++
    ) {
      const spare = this.open(true);
      if (!spare) return;
      this.openingSpares.add(spare);
    }
  }

  /** Connections open or opening, whatever they do. */
  get size(): number {
    return this.busy.size + this.idle.length + this.spares.length + this.openingSpares.size;
  }

  /** Closes every connection not carrying a request, and those still opening; takes no more spares. */
  destroy(): void {
    this.destroyed = true;
    for (const exchange of [...this.waiting.splice(0), ...this.waitingStreamed.splice(0)]) {
      exchange.queuedIn = null;
      exchange.abort();
    }
    const opening = [...this.openingSpares];
    this.openingSpares.clear();
    for (const connection of [...this.idle.splice(0), ...this.spares.splice(0), ...opening])
      this.drop(connection);
  }

  /**
   * The newest connection of `list` (idle or spare) still open both ways. One whose upstream already
   * closed it (its 'end' came, its 'close' not yet) is dropped: a request written there would be lost.
   */
  private takeUsable(list: UpstreamConnection[]): UpstreamConnection | undefined {
    for (let connection = list.pop(); connection; connection = list.pop()) {
      if (usable(connection)) return connection;
      this.drop(connection);
    }
    return undefined;
  }

  private carry(connection: UpstreamConnection, exchange: UpstreamExchange): void {
    exchange.queuedIn = null;
    if (exchange.streamedBody) {
      connection.streamsBody = true;
      this.streaming++;
    }
    connection.carry(exchange);
  }

  private stopCounting(connection: UpstreamConnection): void {
    if (!connection.streamsBody) return;
    connection.streamsBody = false;
    this.streaming--;
  }

  private enqueue(exchange: UpstreamExchange): void {
    exchange.queuedIn = this;
    exchange.queuedAt = Date.now();
    (exchange.streamedBody ? this.waitingStreamed : this.waiting).push(exchange);
  }

  /** The next waiting request a free connection may carry: one read whole first, then a streamed one. */
  private nextWaiting(): UpstreamExchange | undefined {
    if (this.waiting.length > 0) return this.waiting.shift();
    return this.streaming < streamedBodyMaxSockets ? this.waitingStreamed.shift() : undefined;
  }

  /** A request waited its queueTimeout (and is out of the queue): it fails, never sent. */
  private giveUpWaiting(exchange: UpstreamExchange): void {
    exchange.queuedIn = null;
    exchange.done = true;
    const seconds = exchange.queueTimeoutMs / 1000;
    const error = Object.assign(new Error(`no connection to ${this.address} came free within ${seconds}s`), {
      code: queueTimeoutCode,
    });
    exchange.handler.upstreamFailed(notSent(exchange.method, queueTimeoutCode), error);
  }

  private open(spare: boolean): UpstreamConnection | null {
    if (!this.target) return null;
    const connection = new UpstreamConnection(this, this.target.host, this.target.port, spare);
    if (!spare) this.busy.add(connection);
    return connection;
  }

  private drop(connection: UpstreamConnection): void {
    connection.state = 'closed';
    connection.socket.destroy();
  }
}

/** The requests of `queue` still within their queueTimeout, and those past it, in one pass. */
function splitExpired(queue: UpstreamExchange[], now: number): [UpstreamExchange[], UpstreamExchange[]] {
  const expired: UpstreamExchange[] = [];
  if (!queue.some((exchange) => now - exchange.queuedAt >= exchange.queueTimeoutMs)) return [queue, expired];
  const kept: UpstreamExchange[] = [];
  for (const exchange of queue)
    (now - exchange.queuedAt >= exchange.queueTimeoutMs ? expired : kept).push(exchange);
  return [kept, expired];
}

function usable(connection: UpstreamConnection): boolean {
  const socket = connection.socket;
  return !socket.destroyed && socket.writable && socket.readable;
}

/** One pool per upstream address, and the timer that keeps them tidy. */
export class UpstreamPools {
  private readonly pools = new Map<string, UpstreamPool>();
  private timer: NodeJS.Timeout | null = null;
  private warmAddresses: ReadonlySet<string> = new Set();

  get(address: string): UpstreamPool {
    let pool = this.pools.get(address);
    if (!pool) {
      pool = new UpstreamPool(address);
      this.pools.set(address, pool);
      this.startTimer();
    }
    return pool;
  }

  /**
   * Keeps `upstreamWarmConnections` connections ready to every address of `addresses`, topped up at
   * the next maintenance tick (not at once: a new table is the moment traffic moves, no time to open
   * connections nobody asked for yet). Each table replaces the set.
   */
  keepWarm(addresses: ReadonlySet<string>): void {
    this.warmAddresses = addresses;
    this.startTimer();
  }

  /** Drops pools of addresses no route uses any more, once nothing is in flight to them. */
  sweep(inUse: ReadonlySet<string>, inFlightTo: (address: string) => number): void {
    for (const [address, pool] of this.pools) {
      if (inUse.has(address) || inFlightTo(address) > 0) continue;
      pool.destroy();
      this.pools.delete(address);
    }
  }

  destroyAll(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.warmAddresses = new Set();
    for (const pool of this.pools.values()) pool.destroy();
    this.pools.clear();
  }

  private startTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.maintain(), upstreamMaintenanceIntervalMs);
    this.timer.unref();
  }

  private maintain(): void {
    const now = Date.now();
    for (const pool of this.pools.values()) pool.closeStale(now);
    for (const address of this.warmAddresses) this.get(address).keepWarm(upstreamWarmConnections);
  }
}
