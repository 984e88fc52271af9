import { type ClientRequest, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { clientResponseHeaders, type RawHeaders, upstreamRequestHeaders } from './forward-headers.js';
import type { InFlightRegistry, Lease } from './in-flight.js';
import { ReplayableBody } from './replayable-body.js';
import {
  type Binding,
  chooseSlot,
  failoverTarget,
  nextReplica,
  type RouteState,
  type Slot,
} from './routing-state.js';
import type { UpstreamAgents } from './upstream-agents.js';

/** Upstreams one request may be sent to: the first, and up to two after it failed to answer. */
export const maxUpstreamAttempts = 3;
/** An upstream that has not accepted a connection within this long counts as refusing it. */
export const upstreamConnectTimeoutMs = 5_000;

export interface ProxyDeps {
  /** The route as the current table has it: failover picks from the newest addresses. */
  currentRoute(routeKey: string): RouteState | undefined;
  agents: UpstreamAgents;
  inFlight: InFlightRegistry;
}

/** The listener a request came in on, as the proxy sees it (route-listeners.ts). */
export interface ProxyListener {
  /** Answer with Connection: close: the listener is going away. */
  readonly closing: boolean;
  /** Called once the response is over. */
  responseClosed(): void;
}

/** What is known about an upstream request that failed before its response began. */
export interface UpstreamFailure {
  method: string;
  code: string | undefined;
  /** The connection was established (or reused), so the request may have reached the upstream. */
  connected: boolean;
  reusedSocket: boolean;
  /** Bytes of a response arrived on the connection. */
  receivedBytes: boolean;
}

const idempotentMethods = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
const resetCodes = new Set(['ECONNRESET', 'EPIPE']);

/**
 * Whether a failed request may go to another upstream. Never once response bytes arrived. Always
 * when no connection was made: the upstream never saw it. A reset of a reused keep-alive socket is
 * the upstream closing an idle connection as we reused it. A reset of a fresh connection may come
 * after the upstream acted on the request, so only idempotent methods are resent (as nginx does).
 */
export function mayRetry(failure: UpstreamFailure): boolean {
  if (failure.receivedBytes) return false;
  if (!failure.connected) return true;
  if (failure.code === undefined || !resetCodes.has(failure.code)) return false;
  return failure.reusedSocket || idempotentMethods.has(failure.method);
}

/**
 * Proxies one request of a route: picks the slot and replica, counts it in flight until the
 * client's response is finished, fails over before any response byte, and streams both bodies.
 */
export function proxyRequest(
  deps: ProxyDeps,
  binding: Binding,
  route: RouteState,
  req: IncomingMessage,
  res: ServerResponse,
  listener: ProxyListener,
): void {
  const slot = chooseSlot(route, binding.kind);
  const address = slot && nextReplica(route, slot, noneTried);
  if (!slot || !address) {
    res.once('close', () => listener.responseClosed());
    sendText(res, 503, `cutover: route ${route.key} has no upstream address\n`);
    return;
  }
  new ProxiedRequest(deps, binding, route, req, res, listener).start(slot, address);
}

const noneTried: ReadonlySet<string> = new Set();

/**
 * One request on its way through the router. A class with methods rather than closures: this is
 * the router's hot path, and every closure or listener per request shows in its profile.
 */
class ProxiedRequest {
  private lease: Lease | null = null;
  /** The client's body, kept for a resend; null for a request without one (GET, HEAD, …). */
  private body: ReplayableBody | null = null;
  private readonly tried: string[] = [];
  private current: ClientRequest | null = null;

  constructor(
    private readonly deps: ProxyDeps,
    private readonly binding: Binding,
    private readonly route: RouteState,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly listener: ProxyListener,
  ) {}

  start(slot: Slot, address: string): void {
    const { req, res } = this;
    this.lease = this.deps.inFlight.begin(this.route.key, slot, address);
    // A client going away shows as res 'close'; errors of either stream must not reach the process.
    req.on('error', ignore);
    res.on('error', ignore);
    res.once('close', () => {
      this.lease?.release();
      if (!res.writableFinished) this.current?.destroy();
      this.listener.responseClosed();
    });
    this.attempt(slot, address);
  }

  private attempt(slot: Slot, address: string): void {
    const { req, res } = this;
    this.tried.push(address);
    const { headers, hasBody } = upstreamRequestHeaders(req, address);
    if (hasBody) this.body ??= new ReplayableBody(req);
    const body = this.body;
    // The body goes out once the connection is up: a refused connection consumes none of it.
    const upstream = sendUpstream(
      this.deps,
      address,
      req,
      headers,
      body && (() => body.attach(upstream.request)),
    );
    this.current = upstream.request;
    upstream.request.once('response', (upstreamRes: IncomingMessage) => {
      body?.commit();
      res.writeHead(
        upstreamRes.statusCode ?? 502,
        upstreamRes.statusMessage,
        clientResponseHeaders(upstreamRes, slot, this.listener.closing),
      );
      forwardBody(upstreamRes, res);
    });
    upstream.request.on('error', (error: NodeJS.ErrnoException) => {
      if (res.headersSent || res.destroyed) return;
      const failure = upstream.failure(req.method ?? 'GET', error.code);
      const replayable = body === null || body.replayable;
      const next =
        mayRetry(failure) && replayable && this.tried.length < maxUpstreamAttempts
          ? failoverTarget(
              this.deps.currentRoute(this.route.key) ?? this.route,
              this.binding.kind,
              slot,
              new Set(this.tried),
            )
          : null;
      if (next) {
        this.lease?.move(next.slot, next.address);
        this.attempt(next.slot, next.address);
        return;
      }
      body?.discard();
      const list = this.tried.join(', ');
      sendText(
        res,
        502,
        `cutover: no upstream of route ${this.route.key} answered (${list}): ${error.message}\n`,
      );
    });
  }
}

function ignore(): void {}

/**
 * Streams an upstream's response body to the client, with backpressure. A cut upstream body cuts the
 * client's (no clean end on a truncated answer); a client gone destroys the upstream request in the
 * 'close' handler of ProxiedRequest. (pipe and stream.pipeline do the same with more listeners, and
 * pipeline builds an AbortController per request: a measurable cost on this path.)
 */
function forwardBody(from: IncomingMessage, to: ServerResponse): void {
  let first = true;
  from.on('data', (chunk: Buffer) => {
    let written: boolean;
    if (first && chunk.length <= inlineFirstChunkBytes) {
      // As a latin1 string (byte for byte), Node sends the first chunk in one string with the
      // headers: one plain write instead of a writev of the two.
      written = to.write(chunk.toString('latin1'), 'latin1');
    } else {
      written = to.write(chunk);
    }
    first = false;
    if (!written) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  });
  from.once('end', () => {
    // What was written is still corked (Node uncorks on the next tick): send it now, alone. Ended
    // with data corked, Node adds an empty chunk to it and sends both with writev.
    const socket = to.socket;
    if (socket) while (socket.writableCorked > 0) socket.uncork();
    to.end();
  });
  from.once('error', () => to.destroy());
}

/** Up to this size, the first chunk of a response body goes out in one write with the headers. */
const inlineFirstChunkBytes = 16 * 1024;

/** Starts an upstream request and watches its connection, to tell later how far it got. */
function sendUpstream(
  deps: ProxyDeps,
  address: string,
  req: IncomingMessage,
  headers: RawHeaders,
  onConnected: (() => void) | null,
): { request: ClientRequest; failure(method: string, code: string | undefined): UpstreamFailure } {
  const target = deps.agents.get(address);
  const upstream = request({
    host: target.host,
    port: target.port,
    method: req.method,
    path: req.url,
    headers,
    agent: target.agent,
  });
  let socket: Socket | null = null;
  let connected = false;
  let bytesBefore = 0;
  upstream.once('socket', (s: Socket) => {
    socket = s;
    bytesBefore = s.bytesRead;
    // Without a body the request is complete: it goes out now (buffered until a new connection is
    // up). Ended only once it has its socket, Node writes it as one string; ended before, as the
    // headers plus an empty chunk, in a writev.
    if (onConnected === null) upstream.end();
    if (!s.connecting) {
      connected = true;
      onConnected?.();
      return;
    }
    const timer = setTimeout(() => {
      const error: NodeJS.ErrnoException = new Error(`connect to ${address} timed out`);
      error.code = 'ETIMEDOUT';
      upstream.destroy(error);
    }, upstreamConnectTimeoutMs);
    s.once('connect', () => {
      connected = true;
      clearTimeout(timer);
      onConnected?.();
    });
    s.once('close', () => clearTimeout(timer));
  });
  return {
    request: upstream,
    failure: (method, code) => ({
      method,
      code,
      connected,
      // A spare connection sat idle like a reused one: the upstream may have closed it.
      reusedSocket: upstream.reusedSocket || (socket !== null && target.agent.wasSpare(socket)),
      receivedBytes: socket !== null && (socket as Socket).bytesRead > bytesBefore,
    }),
  };
}

export function sendText(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}
