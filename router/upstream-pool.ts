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
 *
 * The parts: upstream-exchange.ts is one request, upstream-connection.ts one connection, this file
 * the pool of one address, upstream-pools.ts the pools of every address and their timer.
 */
import { parseHostPort } from '../core/host-port.js';
import { type ConnectionOwner, UpstreamConnection } from './upstream-connection.js';
import type { ExchangeQueue, UpstreamExchange, UpstreamFailure } from './upstream-exchange.js';

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

/** The failure of a request that never left the router: it may go to another upstream. */
function notSent(method: string, code: string): UpstreamFailure {
  return { method, code, requestSent: false, staleConnection: false, receivedBytes: false };
}

/** The connections to one upstream address. */
export class UpstreamPool implements ConnectionOwner, ExchangeQueue {
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
