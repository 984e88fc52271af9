/**
 * What the router refuses of a request Node's parser accepted, before anything of it goes upstream.
 * Pure: the request line and raw header list in, a refusal or the target to send out.
 *
 * nginx is the bar (issue 16: the router must never execute a request nginx would not). Node's
 * parser is strict about framing (both Content-Length and Transfer-Encoding, bad chunk sizes, bare
 * LF, control characters: all 400), but lets through what nginx refuses here: codings other than
 * plain chunked, a Host header twice or malformed, targets nginx will not route, and lines beyond
 * nginx's buffers. Each check is nginx 1.22's, or a little stricter; the size limits are nginx's own
 * boundary, or more generous where Node hides the exact byte count.
 */

/**
 * nginx's large_client_header_buffers (4 of 8 KiB): a request line or a header line must fit in one
 * buffer, its CRLF included (a longer request line gets 414, a longer header line 400).
 */
const largeHeaderBufferBytes = 8 * 1024;
const largeHeaderBuffers = 4;
/** A request line longer than this, its CRLF included, is refused (414). */
export const maxRequestLineBytes = largeHeaderBufferBytes;
/**
 * A header line longer than this, its CRLF included, is refused (431). Counted without the
 * whitespace around the value, which Node's parser trims away: never stricter than nginx, and a
 * line padded with spaces may pass a few bytes over nginx's buffer.
 */
export const maxHeaderLineBytes = largeHeaderBufferBytes;
/**
 * The most bytes of a whole request head, the route listeners' maxHeaderSize: nginx's first
 * client_header_buffer (1 KiB) and its four large buffers. Node's default (16 KiB) refused heads
 * nginx serves, such as two header lines of 8 KB (a long cookie and a token).
 */
export const maxRequestHeadBytes = 1024 + largeHeaderBuffers * largeHeaderBufferBytes;
/**
 * More header fields than this are refused: nginx refuses about a thousand short lines, and Node
 * silently drops fields beyond its maxHeadersCount (2000) — a Content-Length among them.
 */
export const maxHeaderFields = 500;

export type RequestVerdict =
  | { ok: true; target: string }
  | { ok: false; status: 400 | 405 | 414 | 431 | 501 | 505; reason: string };

export interface RequestLine {
  method: string;
  url: string;
  httpVersionMajor: number;
  httpVersionMinor: number;
  rawHeaders: readonly string[];
}

/** Whether the router serves `request`, and with which target (absolute-form becomes origin-form). */
export function checkRequest(request: RequestLine): RequestVerdict {
  const { method, url, httpVersionMajor, httpVersionMinor } = request;
  // RFC 9112 §2.3: HTTP/1.x only (Node's parser reads any digit.digit).
  if (httpVersionMajor !== 1)
    return refuse(505, `HTTP/${httpVersionMajor}.${httpVersionMinor} is not supported (HTTP/1.1 is)`);
  // METHOD SP target SP HTTP/1.x CRLF: Node's parser takes single spaces only.
  if (method.length + url.length + 12 > maxRequestLineBytes)
    return refuse(414, `the request line is over ${maxRequestLineBytes} bytes`);
  // TRACE echoes the request, credentials included, to whoever can make a browser send it.
  if (method === 'TRACE') return refuse(405, 'TRACE is not allowed');
  const headers = checkHeaders(request.rawHeaders, httpVersionMinor === 0);
  if (headers !== null) return headers;
  return checkTarget(url);
}

function checkHeaders(raw: readonly string[], http10: boolean): RequestVerdict | null {
  if (raw.length > 2 * maxHeaderFields) return refuse(431, `more than ${maxHeaderFields} header fields`);
  let hosts = 0;
  let codings: string | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    // name ":" value CRLF
    if (name.length + value.length + 3 > maxHeaderLineBytes)
      return refuse(431, `the ${name} header line is over ${maxHeaderLineBytes} bytes`);
    if (name.length === 4 && name.toLowerCase() === 'host') {
      if (++hosts > 1) return refuse(400, 'Host is sent twice');
      if (!validHost(value)) return refuse(400, `Host ${JSON.stringify(value)} is not a host name`);
    } else if (name.length === 17 && name.toLowerCase() === 'transfer-encoding')
      codings = codings === null ? value : `${codings}, ${value}`;
  }
  if (codings === null) return null;
  // Chunked is the one coding the router (and nginx) frames a request body by: any other, or a
  // list, would leave the body's end to a reading the upstream may not share.
  if (codings.trim().toLowerCase() !== 'chunked')
    return refuse(501, `Transfer-Encoding ${JSON.stringify(codings)} is not supported (only chunked)`);
  if (http10) return refuse(400, 'Transfer-Encoding in an HTTP/1.0 request');
  return null;
}

/**
 * nginx's test of a Host value: not empty, no whitespace or control character, no path separator,
 * no empty label (`..`).
 */
function validHost(value: string): boolean {
  if (value === '' || value.includes('..')) return false;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code <= 0x20 || code === 0x7f || code === 0x2f) return false;
  }
  return true;
}

/** Origin-form targets pass; absolute-form ones are sent on as origin-form, as nginx does. */
function checkTarget(url: string): RequestVerdict {
  let target = url;
  if (!url.startsWith('/')) {
    const absolute = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/([^/?#]*)(.*)$/.exec(url);
    if (!absolute) return refuse(400, `the request target ${JSON.stringify(url)} is not a path`);
    if ((absolute[1] as string).includes('@'))
      return refuse(400, 'the request target holds user information');
    const rest = absolute[2] as string;
    target = rest.startsWith('/') ? rest : `/${rest}`;
  }
  // A NUL in the decoded path (nginx decodes it to route it).
  const query = target.indexOf('?');
  if ((query < 0 ? target : target.slice(0, query)).includes('%00'))
    return refuse(400, 'the request path holds %00');
  return { ok: true, target };
}

function refuse(status: 400 | 405 | 414 | 431 | 501 | 505, reason: string): RequestVerdict {
  return { ok: false, status, reason };
}
