import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import {
  clientResponseHeaders,
  type RawHeaders,
  upstreamRequestHead,
  upstreamRequestHeaders,
} from './forward-headers.js';
import type { InFlightRegistry, Lease } from './in-flight.js';
import {
  type BodyBudget,
  type BodyReader,
  type BodyTimeoutCause,
  ReplayableBody,
} from './replayable-body.js';
import {
  type Binding,
  chooseSlot,
  failoverTarget,
  nextReplica,
  type RouteState,
  type Slot,
} from './routing-state.js';
import type { OpenRequest, SlotMetrics } from './slot-metrics.js';
import { type ExchangeHandler, UpstreamExchange, type UpstreamFailure } from './upstream-exchange.js';
import { queueTimeoutCode } from './upstream-pool.js';
import type { UpstreamPools } from './upstream-pools.js';

/** Upstreams one request may be sent to: the first, and up to two after it failed to answer. */
export const maxUpstreamAttempts = 3;
/**
 * Retry-After of a 503 for a request that found every connection to its upstream busy for the
 * route's queueTimeout, or the router's memory for bodies full for its bodyTimeout: a connection
 * or memory frees as soon as any exchange ends, so soon is worth a try.
 */
export const queueFullRetryAfterSeconds = 1;

export interface ProxyDeps {
  /** The route as the current table has it: failover picks from the newest addresses. */
  currentRoute(routeKey: string): RouteState | undefined;
  pools: UpstreamPools;
  inFlight: InFlightRegistry;
  /** Memory for request bodies read before they go upstream, shared by the router's requests. */
  bodies: BodyBudget;
  /** Requests, 5xx and latency per route and slot, counted as each response ends. */
  metrics: SlotMetrics;
}

/** The listener a request came in on, as the proxy sees it (route-listeners.ts). */
export interface ProxyListener {
  /** Answer with Connection: close: the listener is going away. */
  readonly closing: boolean;
  /** Called once the response is over. */
  responseClosed(): void;
  /** The request is taken and its body about to be read: a client waiting for 100 Continue gets it. */
  continueRequest(res: ServerResponse): void;
}

const idempotentMethods: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
const resetCodes: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE']);

/**
 * Whether a failed request may go to another upstream. Never once response bytes arrived. Always
 * when it provably never reached the upstream: the connection never came up, or a reused one
 * refused its first byte. Otherwise the upstream may have acted on it, whatever kind of connection
 * carried it, so only an idempotent method is sent again, and only after a reset or a close (a
 * timeout is answered 504). nginx never resends a POST, PATCH or LOCK it has sent either.
 */
export function mayRetry(failure: UpstreamFailure): boolean {
  // Every connection stayed busy for the wait: the route is overloaded, and another queue would
  // double the wait. The client hears 503 and when to come back.
  if (failure.receivedBytes || failure.code === queueTimeoutCode) return false;
  if (!failure.requestSent) return true;
  if (failure.code === undefined || !resetCodes.has(failure.code)) return false;
  return idempotentMethods.has(failure.method);
}

/**
 * Proxies one request of a route: picks the slot and replica, counts it in flight until the
 * client's response is finished, reads the request body (up to a bound) before taking an upstream
 * connection, fails over before any response byte, and streams both bodies. `arrivedMs`
 * (performance.now()): when the request came, for one the router held first (its duration counts
 * from then).
 */
export function proxyRequest(
  deps: ProxyDeps,
  binding: Binding,
  route: RouteState,
  req: IncomingMessage,
  res: ServerResponse,
  listener: ProxyListener,
  arrivedMs = performance.now(),
): void {
  const slot = chooseSlot(route, binding.kind);
  const address = slot && nextReplica(route, slot, noneTried);
  if (!slot || !address) {
    refuseRequest(req, res, listener, 503, `cutover: route ${route.key} has no upstream address\n`);
    return;
  }
  new ProxiedRequest(deps, binding, route, req, res, listener, arrivedMs).start(slot, address);
}

/**
 * The router's own answer to a request it sends nowhere, before its body was read: the listener
 * hears when it is over, and a body is not read for nothing (the connection closes instead).
 */
export function refuseRequest(
  req: IncomingMessage,
  res: ServerResponse,
  listener: Pick<ProxyListener, 'responseClosed'>,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  res.once('close', () => listener.responseClosed());
  const unreadBody = upstreamRequestHeaders(req, '').body !== 'none';
  sendText(res, status, text, unreadBody ? { ...headers, connection: 'close' } : headers);
}

const noneTried: ReadonlySet<string> = new Set();

/**
 * One request on its way through the router, and the handler of its upstream exchanges. A class
 * with methods rather than closures: this is the router's hot path, and every closure or listener
 * per request shows in its profile.
 */
class ProxiedRequest implements ExchangeHandler, BodyReader {
  private lease: Lease | null = null;
  /** The client's body, kept for a resend; null for a request without one (GET, HEAD, …). */
  private body: ReplayableBody | null = null;
  private readonly tried: string[] = [];
  private current: UpstreamExchange | null = null;
  private slot: Slot = 'blue';
  private firstBodyChunk = true;
  /** A 'drain' listener is on the response: reading the upstream resumes when the client drains. */
  private awaitingDrain = false;
  /** The answer was cut after it began: a failure for the client, whatever its status said. */
  private cut = false;
  /** Counted as in flight to its slot (main listener only): a hanging slot shows in its traffic. */
  private open: OpenRequest | null = null;

  constructor(
    private readonly deps: ProxyDeps,
    private readonly binding: Binding,
    private readonly route: RouteState,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly listener: ProxyListener,
    /** When the request arrived (performance.now(), ms): its duration ends when the response does. */
    private readonly arrivedMs: number,
  ) {}

  start(slot: Slot, address: string): void {
    const { req, res } = this;
    this.lease = this.deps.inFlight.begin(this.route.key, slot, address);
    if (this.binding.kind === 'main')
      this.open = this.deps.metrics.opened(this.route.key, slot, this.arrivedMs);
    // A client going away shows as res 'close'; errors of either stream must not reach the process.
    req.on('error', ignore);
    res.on('error', ignore);
    res.once('close', () => {
      this.lease?.release();
      if (this.open) this.deps.metrics.closed(this.route.key, this.open);
      // Counted on the slot that answered (after any failover), once, when the client's response is
      // over. Only the main listener's: what users get is judged, not the gate's preview probes.
      if (this.binding.kind === 'main')
        this.deps.metrics.record(
          this.route.key,
          this.slot,
          res.statusCode,
          performance.now() - this.arrivedMs,
          this.cut,
        );
      if (!res.writableFinished) this.current?.abort();
      this.body?.close();
      this.listener.responseClosed();
    });
    this.listener.continueRequest(res);
    this.attempt(slot, address);
  }

  private attempt(slot: Slot, address: string): void {
    const { req } = this;
    this.slot = slot;
    if (this.open) this.open.slot = slot;
    this.tried.push(address);
    const { headers, body } = upstreamRequestHeaders(req, address);
    if (body !== 'none') this.body ??= new ReplayableBody(req, this.deps.bodies, this.route.bodyTimeoutMs);
    const method = req.method ?? 'GET';
    const exchange = new UpstreamExchange(
      method,
      upstreamRequestHead(method, req.url ?? '/', headers),
      body,
      this,
      this.route.upstreamTimeoutMs,
      this.route.queueTimeoutMs,
    );
    this.current = exchange;
    // A body is read first (as nginx's proxy_request_buffering): a slow client holds no connection.
    if (this.body && !this.body.isReady) this.body.read(this);
    else this.send(exchange, address);
  }

  /** The body is read (or as much of it as is kept): the request goes to its upstream now. */
  bodyReady(): void {
    const exchange = this.current;
    const address = this.tried[this.tried.length - 1];
    if (exchange && !exchange.done && address !== undefined && !this.res.destroyed)
      this.send(exchange, address);
  }

  private send(exchange: UpstreamExchange, address: string): void {
    // A body still coming holds its connection while it comes: the pool caps how many do.
    exchange.streamedBody = this.body?.streamed === true;
    // A small body read whole goes with the head in one write (on a connection that is up).
    if (this.body && exchange.body === 'length')
      exchange.inlineBody = this.body.whole(inlineRequestMaxBytes - exchange.head.length);
    this.deps.pools.get(address).send(exchange);
  }

  /**
   * Reading the body stopped for the route's bodyTimeout: the client went silent mid-body (408), or
   * the router had no memory for it (503). Either way the connection closes: its framing is lost.
   */
  bodyTimedOut(cause: BodyTimeoutCause): void {
    const { res } = this;
    this.current?.abort();
    this.body?.close();
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const seconds = this.route.bodyTimeoutMs / 1000;
    const timeout = `bodyTimeout of route ${this.route.key}`;
    const close = { connection: 'close' };
    switch (cause) {
      case 'client-silent':
        sendText(
          res,
          408,
          `cutover: the client sent no byte of its request body for ${seconds}s (${timeout})\n`,
          close,
        );
        return;
      case 'memory-full':
        sendText(
          res,
          503,
          `cutover: the router's memory for request bodies was full: this body waited ${seconds}s for it (${timeout}); try again shortly\n`,
          { ...close, 'retry-after': String(queueFullRetryAfterSeconds) },
        );
        return;
      default: {
        const never: never = cause;
        throw new Error(`unknown body timeout ${String(never)}`);
      }
    }
  }

  /** The body goes out once the connection is up: a refused connection consumes none of it. */
  upstreamConnected(): void {
    if (this.current) this.body?.attach(this.current);
  }

  upstreamHead(status: number, reason: string, headers: RawHeaders): void {
    this.body?.commit();
    const { res } = this;
    if (res.destroyed) return;
    try {
      res.writeHead(status, reason, clientResponseHeaders(headers, this.slot, this.closesConnection()));
    } catch (error) {
      // A header Node will not send (the parser let it through, Node's own checks did not).
      this.current?.abort();
      sendText(
        res,
        502,
        `cutover: the upstream of route ${this.route.key} answered badly: ${(error as Error).message}\n`,
      );
    }
  }

  upstreamBody(chunk: Buffer, last: boolean): boolean {
    const { res } = this;
    if (res.destroyed || res.writableEnded) return true;
    // As a latin1 string (byte for byte), Node sends a small first chunk with the headers in one
    // write, instead of a writev of the two.
    const inline = this.firstBodyChunk && chunk.length <= inlineFirstChunkBytes;
    this.firstBodyChunk = false;
    const more =
      chunk.length === 0 ? true : inline ? res.write(chunk.toString('latin1'), 'latin1') : res.write(chunk);
    if (last) {
      // Node corks a response's first write until the next tick; `end` with data still corked adds
      // an empty chunk and sends both with writev. Uncorked first, the answer goes out as one write.
      const socket = res.socket;
      if (socket) while (socket.writableCorked > 0) socket.uncork();
      res.end();
      return true;
    }
    if (!more && !this.awaitingDrain) {
      this.awaitingDrain = true;
      const exchange = this.current;
      res.once('drain', () => {
        this.awaitingDrain = false;
        exchange?.resume();
      });
    }
    return more;
  }

  upstreamFailed(failure: UpstreamFailure, error: Error): void {
    const { res } = this;
    // Part of the answer went out: the client must see it cut, never a clean end.
    if (res.headersSent) {
      this.cut = true;
      res.destroy();
      return;
    }
    if (res.destroyed) return;
    const body = this.body;
    const replayable = body === null || body.replayable;
    const next =
      mayRetry(failure) && replayable && this.tried.length < maxUpstreamAttempts
        ? this.retryTarget(failure)
        : null;
    if (next) {
      this.lease?.move(next.slot, next.address);
      this.attempt(next.slot, next.address);
      return;
    }
    // The rest of an unread body is not read: the answer closes the connection instead.
    const close: Record<string, string> = this.closesConnection() ? { connection: 'close' } : {};
    body?.close();
    if (failure.code === queueTimeoutCode) {
      sendText(res, 503, `cutover: route ${this.route.key} is overloaded: ${error.message}\n`, {
        ...close,
        'retry-after': String(queueFullRetryAfterSeconds),
      });
      return;
    }
    const list = this.tried.join(', ');
    // A connect or read timeout is a gateway timeout (as nginx answers); anything else a bad gateway.
    sendText(
      res,
      failure.code === 'ETIMEDOUT' ? 504 : 502,
      `cutover: no upstream of route ${this.route.key} answered (${list}): ${error.message}\n`,
      close,
    );
  }

  /**
   * The answer closes the client's connection: the listener is going away, or the request is not
   * read to its end (as nginx, the router does not read the rest of a body nobody will take).
   */
  private closesConnection(): boolean {
    return this.listener.closing || !this.req.complete;
  }

  /**
   * A stale connection's address again (the pool picks another connection), if the current table
   * still has it; else another address of the current table.
   */
  private retryTarget(failure: UpstreamFailure): { slot: Slot; address: string } | null {
    const route = this.deps.currentRoute(this.route.key) ?? this.route;
    const address = this.tried[this.tried.length - 1];
    if (failure.staleConnection && address !== undefined && route[this.slot].includes(address))
      return { slot: this.slot, address };
    return failoverTarget(route, this.binding.kind, this.slot, new Set(this.tried));
  }
}

function ignore(): void {}

/**
 * Up to this size in all, a request's head and its body (read whole) go upstream in one write. Small
 * enough to fit an idle connection's send buffer at once (16 KiB at first on Linux): the write is
 * not cut in two, so its failure still proves that no byte of the request left the router.
 */
const inlineRequestMaxBytes = 8 * 1024;

/** Up to this size, the first chunk of a response body goes out in one write with the headers. */
const inlineFirstChunkBytes = 16 * 1024;

export function sendText(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  // The reason phrase named: an upstream's, set by a writeHead that failed, must not stay.
  res.writeHead(status, STATUS_CODES[status] ?? '', {
    ...headers,
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}
