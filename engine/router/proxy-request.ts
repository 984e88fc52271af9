import { type ClientRequest, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { clientResponseHeaders, upstreamRequestHeaders } from './forward-headers.js';
import { parseHostPort } from './host-port.js';
import type { InFlightRegistry } from './in-flight.js';
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
  listenerClosing: () => boolean,
): void {
  const slot = chooseSlot(route, binding.kind);
  const address = slot && nextReplica(route, slot, new Set());
  if (!slot || !address) {
    sendText(res, 503, `cutover: route ${route.key} has no upstream address\n`);
    return;
  }
  const lease = deps.inFlight.begin(route.key, slot, address);
  const body = new ReplayableBody(req);
  const tried = new Set<string>();
  let current: ClientRequest | null = null;
  // A client going away shows as res 'close'; errors of either stream must not reach the process.
  req.on('error', () => undefined);
  res.on('error', () => undefined);
  res.once('close', () => {
    lease.release();
    if (!res.writableFinished) current?.destroy();
  });

  const attempt = (slot: Slot, address: string): void => {
    tried.add(address);
    // The body goes out once the connection is up: a refused connection consumes none of it.
    const upstream = sendUpstream(deps, address, req, () => body.attach(upstream.request));
    current = upstream.request;
    upstream.request.once('response', (upstreamRes) => {
      body.commit();
      res.writeHead(
        upstreamRes.statusCode ?? 502,
        upstreamRes.statusMessage,
        clientResponseHeaders(upstreamRes, slot, listenerClosing()),
      );
      // A cut upstream body cuts the client's (no clean end on a truncated answer); a client gone
      // destroys the upstream request in the 'close' handler above. (stream.pipeline does the same
      // but builds an AbortController per request: a measurable cost on this path.)
      upstreamRes.on('error', () => res.destroy());
      upstreamRes.pipe(res);
    });
    upstream.request.on('error', (error: NodeJS.ErrnoException) => {
      if (res.headersSent || res.destroyed) return;
      const failure = upstream.failure(req.method ?? 'GET', error.code);
      const next =
        mayRetry(failure) && body.replayable && tried.size < maxUpstreamAttempts
          ? failoverTarget(deps.currentRoute(route.key) ?? route, binding.kind, slot, tried)
          : null;
      if (next) {
        lease.move(next.slot, next.address);
        attempt(next.slot, next.address);
        return;
      }
      body.discard();
      const list = [...tried].join(', ');
      sendText(res, 502, `cutover: no upstream of route ${route.key} answered (${list}): ${error.message}\n`);
    });
  };
  attempt(slot, address);
}

/** Starts an upstream request and watches its connection, to tell later how far it got. */
function sendUpstream(
  deps: ProxyDeps,
  address: string,
  req: IncomingMessage,
  onConnected: () => void,
): { request: ClientRequest; failure(method: string, code: string | undefined): UpstreamFailure } {
  const target = parseHostPort(address);
  const upstream = request({
    host: target?.host,
    port: target?.port,
    method: req.method,
    path: req.url,
    headers: upstreamRequestHeaders(req),
    agent: deps.agents.get(address),
  });
  let socket: Socket | null = null;
  let connected = false;
  let bytesBefore = 0;
  upstream.once('socket', (s: Socket) => {
    socket = s;
    bytesBefore = s.bytesRead;
    if (!s.connecting) {
      connected = true;
      onConnected();
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
      onConnected();
    });
    s.once('close', () => clearTimeout(timer));
  });
  return {
    request: upstream,
    failure: (method, code) => ({
      method,
      code,
      connected,
      reusedSocket: upstream.reusedSocket,
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
