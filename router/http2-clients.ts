import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import {
  createServer as createHttp2Server,
  Http2ServerRequest,
  Http2ServerResponse,
  type Http2Session,
} from 'node:http2';
import type { Server, Socket } from 'node:net';
import type { ProxyListener } from './proxy-request.js';
import type { ConnectionListener } from './refusals.js';
import { checkRequest, maxHeaderFields, maxRequestHeadBytes } from './request-checks.js';

/**
 * HTTP/2 clients of a route listener (TLS with ALPN h2, or h2c with prior knowledge), proxied to
 * the same HTTP/1.1 upstreams by the same path as HTTP/1.1 clients (proxy-request.ts): each stream
 * is one request, checked by request-checks.ts as an HTTP/1.1 request with the same head (its
 * pseudo-headers made into a request line and Host), with the same body bounds, timeouts, holds and
 * metrics. nghttp2 refuses what HTTP/2 itself forbids (connection-specific headers, upper-case
 * names, a body longer or shorter than its Content-Length, malformed pseudo-headers).
 */

/** Streams one connection may have open at once: nginx's http2_max_concurrent_streams. */
export const maxConcurrentStreams = 128;

/** What a listener's HTTP/2 side needs of the route listener. */
export interface Http2Listener extends ConnectionListener {}

export type Http2Handler = (client: ProxyListener, req: IncomingMessage, res: ServerResponse) => void;

/** How a connection is recognised as HTTP/2: by ALPN (TLS), or by its first bytes (h2c). */
export type Http2Detection = 'alpn' | 'preface';

/** The HTTP/2 side of one listener: its sessions, to close with the listener. */
export interface Http2Side {
  /** The listener is going away: every session gets GOAWAY and ends once its streams are answered. */
  close(): void;
  /** Past the grace: every session is cut. */
  destroy(): void;
}

/**
 * Serves HTTP/2 on `server`'s connections: the connections it recognises go to an HTTP/2 server of
 * their own, the others to `server`'s own listeners of `event` ('connection', or 'secureConnection'
 * for TLS), as before. Call once those listeners are on.
 */
export function serveHttp2(
  server: Server,
  event: 'connection' | 'secureConnection',
  detection: Http2Detection,
  listener: Http2Listener,
  handle: Http2Handler,
  idleTimeoutMs: number,
): Http2Side {
  const http2 = createHttp2Server({
    Http2ServerRequest: ProxiedHttp2Request,
    Http2ServerResponse: ProxiedHttp2Response,
    // Pseudo-headers and header fields: request-checks.ts answers 431 past its bound, not nghttp2.
    maxHeaderListPairs: 2 * maxHeaderFields + 8,
    settings: { maxConcurrentStreams, maxHeaderListSize: 2 * maxRequestHeadBytes },
  });
  const sessions = new Set<Http2Session>();
  http2.on('session', (session: Http2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    session.on('error', () => undefined);
    // As an idle HTTP/1.1 connection (keepAliveTimeout): GOAWAY, streams still open are answered.
    session.setTimeout(idleTimeoutMs, () => session.close());
    if (listener.closing) session.close();
  });
  const onRequest = (awaitsContinue: boolean) => (req: Http2ServerRequest, res: Http2ServerResponse) =>
    serveStream(req as ProxiedHttp2Request, res as ProxiedHttp2Response, awaitsContinue, listener, handle);
  http2.on('request', onRequest(false));
  http2.on('checkContinue', onRequest(true));
  http2.on('connect', (_req: Http2ServerRequest, res: Http2ServerResponse) =>
    refuse(res, listener, 400, 'CONNECT is not supported'),
  );
  const others = server.listeners(event) as ((socket: Socket) => void)[];
  server.removeAllListeners(event);
  const toHttp1 = (socket: Socket) => {
    for (const other of others) other.call(server, socket);
  };
  server.on(event, (socket: Socket) => {
    if (detection === 'alpn') {
      if ((socket as { alpnProtocol?: string | false }).alpnProtocol === 'h2')
        http2.emit('connection', socket);
      else toHttp1(socket);
      return;
    }
    sniffPreface(socket, (isHttp2) => {
      if (isHttp2) {
        // Node's HTTP/2 session reads what the sniff put back before it reads the socket itself.
        http2.emit('connection', socket);
        return;
      }
      toHttp1(socket);
      // The router's HTTP/1.1 connection reads the bytes put back from the stream, once it flows again.
      socket.resume();
    });
  });
  return {
    close: () => {
      for (const session of sessions) session.close();
    },
    destroy: () => {
      for (const session of sessions) session.destroy();
    },
  };
}

/** A stream's request, checked as HTTP/1.1 would be, then proxied (or refused, the stream alone). */
function serveStream(
  req: ProxiedHttp2Request,
  res: ProxiedHttp2Response,
  awaitsContinue: boolean,
  listener: Http2Listener,
  handle: Http2Handler,
): void {
  req.on('error', () => undefined);
  res.on('error', () => undefined);
  const translated = http1Head(req);
  if (typeof translated === 'string') {
    refuse(res, listener, 400, translated);
    return;
  }
  const verdict = checkRequest({
    method: req.method,
    url: req.url,
    httpVersionMajor: 1,
    httpVersionMinor: 1,
    rawHeaders: translated,
  });
  if (!verdict.ok) {
    refuse(res, listener, verdict.status, verdict.reason);
    return;
  }
  // The proxy reads the head as an HTTP/1.1 request's (forward-headers.ts).
  req.http1Headers = translated;
  req.url = verdict.target;
  let continued = !awaitsContinue;
  const client: ProxyListener = {
    get closing() {
      return listener.closing;
    },
    responseClosed: () => listener.responseClosed(),
    continueRequest: (response) => {
      if (continued || response !== (res as unknown)) return;
      continued = true;
      res.writeContinue();
    },
  };
  handle(client, req as unknown as IncomingMessage, res as unknown as ServerResponse);
}

/**
 * The request's header list as an HTTP/1.1 request would carry it: pseudo-headers dropped,
 * `:authority` as Host (RFC 9113 §8.3.1), cookie crumbs joined into one line (§8.2.3), and a body
 * with no Content-Length sent chunked. A string: why the request is malformed.
 */
function http1Head(req: Http2ServerRequest): string[] | string {
  const raw = req.rawHeaders;
  const out: string[] = [];
  let authority: string | undefined;
  let host: string | undefined;
  let cookies: string | undefined;
  let length = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    if (name.charCodeAt(0) === 58 /* : */) {
      if (name === ':authority') authority = value;
      continue;
    }
    if (name === 'cookie') {
      cookies = cookies === undefined ? value : `${cookies}; ${value}`;
      continue;
    }
    if (name === 'host') host = value;
    else if (name === 'content-length') length = true;
    out.push(name, value);
  }
  if (authority !== undefined && host !== undefined && authority !== host)
    return `:authority ${JSON.stringify(authority)} and Host ${JSON.stringify(host)} differ`;
  if (host === undefined && authority !== undefined) out.unshift('host', authority);
  if (cookies !== undefined) out.push('cookie', cookies);
  if (!length && !req.stream.endAfterHeaders) out.push('transfer-encoding', 'chunked');
  return out;
}

function refuse(res: Http2ServerResponse, listener: Http2Listener, status: number, reason: string): void {
  res.once('close', () => listener.responseClosed());
  const text = `cutover: ${reason}\n`;
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * A stream's request whose `rawHeaders`, once checked, are its HTTP/1.1 head (http1Head): the
 * proxy forwards them as an HTTP/1.1 request's. Set on a field of the class rather than defined
 * on each request: an own property defined per request would change its shape on the hot path.
 */
class ProxiedHttp2Request extends Http2ServerRequest {
  http1Headers: string[] | undefined = undefined;
}

const http2RawHeaders = Object.getOwnPropertyDescriptor(Http2ServerRequest.prototype, 'rawHeaders')?.get;
Object.defineProperty(ProxiedHttp2Request.prototype, 'rawHeaders', {
  get(this: ProxiedHttp2Request) {
    return this.http1Headers ?? http2RawHeaders?.call(this);
  },
});

/** Headers HTTP/2 forbids (RFC 9113 §8.2.2): they describe an HTTP/1.1 connection. */
const connectionSpecific: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/**
 * A stream's response as the proxy writes an HTTP/1.1 one (proxy-request.ts): `writeHead` with a
 * reason phrase (HTTP/2 has none) and a raw header list, `destroyed` once the stream is.
 * Connection-specific headers are left out (the proxy's `Connection: close` included: a stream
 * ends alone).
 */
class ProxiedHttp2Response extends Http2ServerResponse<ProxiedHttp2Request> {
  override writeHead(status: number, ...rest: unknown[]): this {
    const headers = rest.find((part) => typeof part === 'object' && part !== null);
    return super.writeHead(status, withoutConnectionHeaders(headers as OutgoingHttpHeaders | string[]));
  }
}

// Node's compatibility response has no `destroyed` of its own (types say it has).
Object.defineProperty(ProxiedHttp2Response.prototype, 'destroyed', {
  get(this: ProxiedHttp2Response) {
    return this.stream.destroyed;
  },
});

function withoutConnectionHeaders(headers: OutgoingHttpHeaders | string[] | undefined): OutgoingHttpHeaders {
  if (headers === undefined) return {};
  if (Array.isArray(headers)) {
    const out: string[] = [];
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i] as string;
      if (!connectionSpecific.has(name.toLowerCase())) out.push(name, headers[i + 1] as string);
    }
    // Node's HTTP/2 takes a raw list as HTTP/1.1's writeHead does (repeated names kept).
    return out as unknown as OutgoingHttpHeaders;
  }
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers))
    if (!connectionSpecific.has(name.toLowerCase())) out[name] = value;
  return out;
}

/** The client connection preface of HTTP/2 (RFC 9113 §3.4). */
const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/**
 * Reads a plain connection's first bytes, up to the length of HTTP/2's preface or the first byte
 * that differs, puts them back, and says whether the client speaks HTTP/2.
 */
function sniffPreface(socket: Socket, decide: (isHttp2: boolean) => void): void {
  let seen: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
    const n = Math.min(seen.length, preface.length);
    const isHttp2 = seen.subarray(0, n).equals(preface.subarray(0, n));
    if (isHttp2 && seen.length < preface.length) return;
    socket.off('data', onData);
    socket.pause();
    socket.unshift(seen);
    decide(isHttp2);
  };
  socket.on('data', onData);
  socket.on('error', () => undefined);
}
