/**
 * The router's own reader of HTTP/1.1 request heads (RFC 9112), for its client connections
 * (http1-connection.ts). Pure: bytes in, a head, a refusal or "not yet" out.
 *
 * Strict as Node's parser (llhttp without its lenient flags) was, which the differential test
 * against nginx measured: CRLF line ends only (a bare LF is refused), no folded header lines, no
 * whitespace before a header's colon, a header name that is a token, no control character in a
 * value, a registered method, single spaces in the request line, HTTP/1.0 or 1.1 (2.0 passes to
 * request-checks.ts, which answers 505); one Content-Length of digits only, never beside a
 * Transfer-Encoding, and a Transfer-Encoding whose last coding is chunked. Sizes are nginx's
 * (request-checks.ts), counted on the bytes as they came.
 *
 * One pass: each line is looked at once, as its end arrives; a head cut over several reads is
 * resumed at the start of the line it stopped in (a client sending byte by byte costs one look per
 * byte and line, never the whole head again).
 */
import { METHODS } from 'node:http';
import {
  maxHeaderFields,
  maxHeaderLineBytes,
  maxRequestHeadBytes,
  maxRequestLineBytes,
} from './request-checks.js';

/** How a request's body is framed. */
export type RequestBody = { kind: 'none' } | { kind: 'length'; bytes: number } | { kind: 'chunked' };

export interface RequestHead {
  method: string;
  url: string;
  httpVersionMajor: number;
  httpVersionMinor: number;
  /** Name, value, name, value…, as sent (values without the whitespace around them). */
  rawHeaders: string[];
  body: RequestBody;
  /** The connection may carry another request after this one (RFC 9112 §9.3). */
  keepAlive: boolean;
  /** `Connection: upgrade` with an `Upgrade` header, or a CONNECT: the socket leaves HTTP. */
  upgrade: boolean;
  /** The value of Expect, if any (HTTP/1.1 only; the connection answers it). */
  expect: string | null;
}

export interface HeadRefusal {
  status: 400 | 414 | 431;
  reason: string;
}

/** What one look at the bytes found: a head (and where it ended), a refusal, or not enough yet. */
export type HeadResult =
  | { kind: 'head'; head: RequestHead; end: number }
  | { kind: 'refused'; refusal: HeadRefusal }
  | { kind: 'partial' };

const knownMethods: ReadonlySet<string> = new Set(METHODS);

const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const HTAB = 0x09;
const COLON = 0x3a;

/** RFC 9110 tchar, by byte. */
const tokenBytes: Uint8Array = (() => {
  const table = new Uint8Array(256);
  for (let c = 0x30; c <= 0x39; c++) table[c] = 1;
  for (let c = 0x41; c <= 0x5a; c++) table[c] = 1;
  for (let c = 0x61; c <= 0x7a; c++) table[c] = 1;
  for (const c of "!#$%&'*+-.^_`|~") table[c.charCodeAt(0)] = 1;
  return table;
})();

export function isTokenByte(byte: number): boolean {
  return tokenBytes[byte] === 1;
}

/** A header value's byte: HTAB, SP, VCHAR, obs-text; no other control character. */
function isValueByte(byte: number): boolean {
  return byte === HTAB || (byte >= SP && byte !== 0x7f);
}

/**
 * Reads one request head, possibly over several reads. `read(buffer, start)` looks at the bytes
 * from `start` (the head's first byte, or, when the previous call said `partial`, the same bytes
 * with more after them); the connection keeps the unread bytes. Reset after each head.
 */
export class RequestHeadParser {
  /** Where the line the last look stopped in starts, relative to the head's start. */
  private resumeAt = 0;
  private lineCount = 0;
  private method = '';
  private url = '';
  private minor = 1;
  private major = 1;
  private rawHeaders: string[] = [];

  reset(): void {
    this.resumeAt = 0;
    this.lineCount = 0;
    this.rawHeaders = [];
  }

  read(buffer: Buffer, start: number): HeadResult {
    const end = buffer.length;
    let lineStart = start + this.resumeAt;
    for (;;) {
      const lf = buffer.indexOf(LF, lineStart);
      const limit = this.lineCount === 0 ? maxRequestLineBytes : maxHeaderLineBytes;
      if (lf < 0) {
        // No line end yet: a line or a head already too long is refused without waiting for more.
        if (end - lineStart > limit) return this.overLine(limit);
        if (end - start > maxRequestHeadBytes) return tooLargeHead;
        // A bare LF would have ended the line: none here. A CR must be the line's last byte.
        const cr = buffer.indexOf(CR, lineStart);
        if (cr >= 0 && cr < end - 1) return refused(400, 'a CR not followed by LF');
        // A request line that cannot become one is refused at once, as llhttp does (a TLS
        // ClientHello sent to a plain port is answered, not waited on).
        if (this.lineCount === 0) {
          const fault = requestLineStartFault(buffer, lineStart, cr >= 0 ? cr : end);
          if (fault) return fault;
        }
        this.resumeAt = lineStart - start;
        return partial;
      }
      if (lf === lineStart || buffer[lf - 1] !== CR) return bareLineFeed(this.lineCount);
      const lineEnd = lf - 1;
      if (lf + 1 - lineStart > limit) return this.overLine(limit);
      if (lf + 1 - start > maxRequestHeadBytes) return tooLargeHead;
      if (this.lineCount === 0) {
        // RFC 9112 §2.2: an empty line before the request line is ignored (as llhttp and nginx do).
        if (lineEnd === lineStart) {
          if (lineStart - start >= 4) return refused(400, 'empty lines before the request line');
          lineStart = lf + 1;
          continue;
        }
        const problem = this.requestLine(buffer, lineStart, lineEnd);
        if (problem) return problem;
      } else if (lineEnd === lineStart) {
        return this.finish(lf + 1);
      } else {
        if (this.rawHeaders.length >= 2 * maxHeaderFields)
          return refused(431, `more than ${maxHeaderFields} header fields`);
        const problem = headerLine(buffer, lineStart, lineEnd, this.rawHeaders);
        if (problem) return problem;
      }
      this.lineCount++;
      lineStart = lf + 1;
    }
  }

  private overLine(limit: number): HeadResult {
    if (this.lineCount === 0) return refused(414, `the request line is over ${limit} bytes`);
    return refused(431, `a header line is over ${limit} bytes`);
  }

  /** METHOD SP request-target SP HTTP/x.y, single spaces. */
  private requestLine(buffer: Buffer, start: number, end: number): HeadResult | null {
    let i = start;
    while (i < end && tokenBytes[buffer[i] as number] === 1) i++;
    if (i === start || i >= end || buffer[i] !== SP) return refused(400, 'a malformed method');
    const method = buffer.toString('latin1', start, i);
    if (!knownMethods.has(method)) return refused(400, `unknown method ${JSON.stringify(method)}`);
    const targetStart = ++i;
    // Printable ASCII only: no whitespace, control character or raw non-ASCII byte in a target.
    while (i < end) {
      const byte = buffer[i] as number;
      if (byte <= SP || byte >= 0x7f) break;
      i++;
    }
    if (i === targetStart) return refused(400, 'no request target');
    if (i === end) return refused(400, 'no HTTP version in the request line');
    if (buffer[i] !== SP) return refused(400, 'a request target with a byte it may not hold');
    const url = buffer.toString('latin1', targetStart, i);
    i++;
    // "HTTP/" DIGIT "." DIGIT, then the line's end.
    if (
      end - i !== 8 ||
      buffer[i] !== 0x48 ||
      buffer[i + 1] !== 0x54 ||
      buffer[i + 2] !== 0x54 ||
      buffer[i + 3] !== 0x50 ||
      buffer[i + 4] !== 0x2f ||
      buffer[i + 6] !== 0x2e
    )
      return refused(400, 'a malformed HTTP version');
    const major = (buffer[i + 5] as number) - 0x30;
    const minor = (buffer[i + 7] as number) - 0x30;
    if (major < 0 || major > 9 || minor < 0 || minor > 9) return refused(400, 'a malformed HTTP version');
    // HTTP/1.0, 1.1, and 2.0 (answered 505 by request-checks.ts), as llhttp reads them.
    if (!((major === 1 && minor <= 1) || (major === 2 && minor === 0)))
      return refused(400, `HTTP/${major}.${minor} is not a version the router reads`);
    this.method = method;
    this.url = url;
    this.major = major;
    this.minor = minor;
    return null;
  }

  /** The empty line: the head is whole. Its framing, as RFC 9112 §6.3 reads it. */
  private finish(end: number): HeadResult {
    const raw = this.rawHeaders;
    let length: number | null = null;
    let codings: string | null = null;
    let hosts = 0;
    let connection = '';
    let upgradeHeader = false;
    let expect: string | null = null;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i] as string;
      const size = name.length;
      if (size !== 4 && size !== 6 && size !== 7 && size !== 10 && size !== 14 && size !== 17) continue;
      const lower = name.toLowerCase();
      const value = raw[i + 1] as string;
      if (lower === 'content-length') {
        if (length !== null) return refused(400, 'Content-Length is sent twice');
        if (!/^[0-9]+$/.test(value))
          return refused(400, `Content-Length ${JSON.stringify(value)} is not a number`);
        length = Number(value);
        if (!Number.isSafeInteger(length)) return refused(400, 'Content-Length is too large');
      } else if (lower === 'transfer-encoding') {
        if (value.endsWith('\t')) return refused(400, 'Transfer-Encoding ends in a tab');
        codings = codings === null ? value : `${codings}, ${value}`;
      } else if (lower === 'host') hosts++;
      else if (lower === 'connection') connection = connection === '' ? value : `${connection},${value}`;
      else if (lower === 'upgrade') upgradeHeader = true;
      else if (lower === 'expect') expect = expect === null ? value : `${expect}, ${value}`;
    }
    let body: RequestBody = { kind: 'none' };
    if (codings !== null) {
      if (length !== null) return refused(400, 'both Content-Length and Transfer-Encoding');
      if (misplacedChunked(codings))
        return refused(400, `Transfer-Encoding ${JSON.stringify(codings)} has chunked before another coding`);
      body = { kind: 'chunked' };
    } else if (length !== null && length > 0) body = { kind: 'length', bytes: length };
    const http11 = this.major === 1 && this.minor === 1;
    // Node's server refused an HTTP/1.1 request without Host (its requireHostHeader), as RFC 9112 §3.2 asks.
    if (http11 && hosts === 0) return refused(400, 'an HTTP/1.1 request without Host');
    const tokens = connectionTokens(connection);
    const keepAlive = this.major === 1 && (http11 ? !tokens.close : tokens.keepAlive);
    const head: RequestHead = {
      method: this.method,
      url: this.url,
      httpVersionMajor: this.major,
      httpVersionMinor: this.minor,
      rawHeaders: raw,
      body,
      keepAlive,
      upgrade: this.method === 'CONNECT' || (tokens.upgrade && upgradeHeader),
      expect: http11 ? expect : null,
    };
    this.reset();
    return { kind: 'head', head, end };
  }
}

const methodList: readonly string[] = METHODS;

/** What is there of a request line cut before its end is not the start of one: its fault. */
function requestLineStartFault(buffer: Buffer, start: number, end: number): HeadResult | null {
  let i = start;
  while (i < end && tokenBytes[buffer[i] as number] === 1) i++;
  const method = buffer.toString('latin1', start, i);
  if (i === end) {
    if (method !== '' && !methodList.some((known) => known.startsWith(method)))
      return refused(400, `unknown method ${JSON.stringify(method)}`);
    return null;
  }
  if (buffer[i] !== SP || !knownMethods.has(method)) return refused(400, 'a malformed method');
  for (i++; i < end; i++) {
    const byte = buffer[i] as number;
    if (byte === SP) break;
    if (byte < SP || byte >= 0x7f) return refused(400, 'a request target with a byte it may not hold');
  }
  if (i === end) return null;
  const version = buffer.toString('latin1', i + 1, end);
  if (!'HTTP/'.startsWith(version.slice(0, 5)) || version.length > 8)
    return refused(400, 'a malformed HTTP version');
  return null;
}

/** name ":" OWS value OWS; appends the name and the trimmed value to `raw`. */
function headerLine(buffer: Buffer, start: number, end: number, raw: string[]): HeadResult | null {
  const first = buffer[start] as number;
  if (first === SP || first === HTAB) return refused(400, 'a folded header line (obs-fold)');
  let i = start;
  while (i < end && tokenBytes[buffer[i] as number] === 1) i++;
  if (i === start || i === end || buffer[i] !== COLON)
    return refused(400, 'a header name that is not a token, or no colon after it');
  const name = buffer.toString('latin1', start, i);
  i++;
  while (i < end && (buffer[i] === SP || buffer[i] === HTAB)) i++;
  const valueStart = i;
  let valueEnd = i;
  for (; i < end; i++) {
    const byte = buffer[i] as number;
    if (!isValueByte(byte)) return refused(400, `a control character in the ${name} header`);
    // Trailing spaces are not the value's; a trailing tab stays (a length or coding ending in one is refused).
    if (byte !== SP) valueEnd = i + 1;
  }
  raw.push(name, buffer.toString('latin1', valueStart, valueEnd));
  return null;
}

/**
 * Whether a Transfer-Encoding list names chunked anywhere but once, last: a framing nobody can
 * read the same way (RFC 9112 §6.3; llhttp refused it). A list without chunked is left to
 * request-checks.ts, which answers 501 as nginx does.
 */
function misplacedChunked(codings: string): boolean {
  const list = codings.split(',');
  for (let i = 0; i < list.length; i++)
    if (trimSpaces(list[i] as string).toLowerCase() === 'chunked' && i !== list.length - 1) return true;
  return false;
}

/** Without the spaces around it (not tabs: a value ending in a tab was refused by llhttp where it frames). */
function trimSpaces(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && (text.charCodeAt(start) === SP || text.charCodeAt(start) === HTAB)) start++;
  while (end > start && text.charCodeAt(end - 1) === SP) end--;
  return text.slice(start, end);
}

interface ConnectionTokens {
  close: boolean;
  keepAlive: boolean;
  upgrade: boolean;
}

const noTokens: ConnectionTokens = { close: false, keepAlive: false, upgrade: false };

function connectionTokens(value: string): ConnectionTokens {
  if (value === '') return noTokens;
  const tokens = { close: false, keepAlive: false, upgrade: false };
  for (const token of value.split(',')) {
    const lower = token.trim().toLowerCase();
    if (lower === 'close') tokens.close = true;
    else if (lower === 'keep-alive') tokens.keepAlive = true;
    else if (lower === 'upgrade') tokens.upgrade = true;
  }
  return tokens;
}

const partial: HeadResult = { kind: 'partial' };
const tooLargeHead: HeadResult = refused(431, `the request head is over ${maxRequestHeadBytes} bytes`);

function bareLineFeed(lineCount: number): HeadResult {
  return refused(400, lineCount === 0 ? 'a bare LF in the request line' : 'a bare LF in the head');
}

function refused(status: HeadRefusal['status'], reason: string): HeadResult {
  return { kind: 'refused', refusal: { status, reason } };
}
