import type { IncomingMessage } from 'node:http';
import type { RequestBodyFraming } from './body-framing.js';
import type { Slot } from './routing-state.js';

/**
 * Headers as Node's raw list: name, value, name, value… (`rawHeaders`). The router forwards headers
 * in this form: it keeps repeated headers (Set-Cookie) as they came, and Node writes such a list as
 * it is, without building and re-validating a header object per message (a measurable cost on the
 * request path).
 */
export type RawHeaders = string[];

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection, not the message: a proxy drops
 * them and opens its own connection. Transfer-Encoding stays on requests because the router sends
 * their body chunked again (upstream-exchange.ts); on responses Node re-frames for its own client.
 */
const hopByHop: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
]);
/** Lengths of the names `isDropped` may have to lower-case: the others are kept without a look. */
const hopByHopLengths: ReadonlySet<number> = new Set(
  [...hopByHop, 'transfer-encoding'].map((name) => name.length),
);

/**
 * Headers a Connection header cannot make hop-by-hop: they frame the message (its body would be
 * lost or misread without them) or say where it goes. nginx ignores Connection's list altogether.
 */
const notNameable: ReadonlySet<string> = new Set([
  'close',
  'keep-alive',
  'content-length',
  'transfer-encoding',
  'host',
]);

/** Names the Connection header lists (more hop-by-hop headers), lower case; null when none. */
function connectionTokens(raw: RawHeaders): Set<string> | null {
  let tokens: Set<string> | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length !== 10 || name.toLowerCase() !== 'connection') continue;
    for (const token of (raw[i + 1] as string).split(',')) {
      const trimmed = token.trim().toLowerCase();
      if (trimmed === '' || notNameable.has(trimmed)) continue;
      tokens ??= new Set();
      tokens.add(trimmed);
    }
  }
  return tokens;
}

function isDropped(name: string, dropTransferEncoding: boolean, named: Set<string> | null): boolean {
  if (!hopByHopLengths.has(name.length) && named === null) return false;
  const lower = name.toLowerCase();
  if (hopByHop.has(lower)) return true;
  if (dropTransferEncoding && lower === 'transfer-encoding') return true;
  return named?.has(lower) ?? false;
}

/** A request's headers for its upstream, and how its body (if any) is framed after them. */
export interface UpstreamRequestHeaders {
  headers: RawHeaders;
  /**
   * RFC 9112 §6.3: any Transfer-Encoding means chunked (Node's server refuses a request whose last
   * coding is another, and one with both framings); a Content-Length other than 0 a fixed length.
   */
  body: RequestBodyFraming;
}

/**
 * Headers sent upstream: the client's end-to-end headers, plus who asked (`x-forwarded-*`). Repeated
 * X-Forwarded-For headers are folded into one, with the client's address last. X-Forwarded-Proto
 * (https over TLS) and X-Forwarded-Host are the router's own (a client's are dropped: it could claim https, or
 * another host). A request without Host (HTTP/1.0) gets the upstream's address, as Node would
 * write it.
 */
export function upstreamRequestHeaders(
  req: IncomingMessage,
  upstreamAddress: string,
): UpstreamRequestHeaders {
  const raw = req.rawHeaders;
  const named = connectionTokens(raw);
  const out: RawHeaders = [];
  let body: RequestBodyFraming = 'none';
  let forwardedFor: string | null = null;
  let host: string | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    if (isDropped(name, false, named)) continue;
    // Only the names below matter here: compare their lengths before lower-casing.
    const length = name.length;
    if (length === 4 || length === 14 || length === 15 || length === 16 || length === 17) {
      const lower = name.toLowerCase();
      if (lower === 'content-length') {
        if (value.trim() !== '0' && body === 'none') body = 'length';
      } else if (lower === 'transfer-encoding') body = 'chunked';
      else if (lower === 'x-forwarded-for') {
        forwardedFor = forwardedFor === null ? value : `${forwardedFor}, ${value}`;
        continue;
      } else if (lower === 'x-forwarded-proto' || lower === 'x-forwarded-host') continue;
      else if (lower === 'host' && host === null) host = value;
    }
    out.push(name, value);
  }
  const { socket } = req;
  const client = socket.remoteAddress ?? '';
  out.push('x-forwarded-for', forwardedFor ? `${forwardedFor}, ${client}` : client);
  // A TLS socket (the session's, for an HTTP/2 stream) says it is encrypted.
  out.push('x-forwarded-proto', (socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http');
  if (host === null) out.push('host', upstreamAddress);
  else out.push('x-forwarded-host', host);
  return { headers: out, body };
}

/** The request line and header fields of a request for its upstream, as sent (latin1). */
export function upstreamRequestHead(method: string, target: string, headers: RawHeaders): string {
  let head = `${method} ${target} HTTP/1.1\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return `${head}\r\n`;
}

/** Headers sent to the client: the upstream's (`raw`, as the response parser read them), plus the slot that answered. */
export function clientResponseHeaders(raw: RawHeaders, slot: Slot, closeConnection: boolean): RawHeaders {
  const named = connectionTokens(raw);
  const out: RawHeaders = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (!isDropped(name, true, named)) out.push(name, raw[i + 1] as string);
  }
  out.push('x-cutover-slot', slot);
  if (closeConnection) out.push('connection', 'close');
  return out;
}
