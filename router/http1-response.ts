/**
 * An incremental parser of HTTP/1.1 responses, for the router's upstream connections. Pure: bytes in,
 * events out, no I/O.
 *
 * It reads what a proxy must understand of a response and nothing more: the status line, the header
 * fields (as a raw name/value list, in order, repeats kept), where the body ends (RFC 9112 §6.3) and,
 * for a chunked body, the chunks' data. It is strict where a lenient reading could let a response be
 * misread as two, or two as one (response splitting): every line ends with CRLF, header names are
 * tokens, values hold no control characters, Content-Length is digits only and agrees with itself,
 * and no byte may follow a complete response on a connection that is not being read to its end.
 */
import type { RawHeaders } from './forward-headers.js';

/** A response head (or the trailers of a chunked body) longer than this is refused. */
export const maxResponseHeadBytes = 64 * 1024;
/** A chunk-size line longer than this is refused (the size plus any chunk extensions). */
export const maxChunkLineBytes = 4 * 1024;

/** How the body of a response is delimited. */
export type BodyFraming = 'none' | 'length' | 'chunked' | 'close';

/** What the parser reports, in order: one `head`, then `body` calls, the last with `last` true. */
export interface ResponseSink {
  /** The final response's head (interim 1xx responses are read and skipped). */
  responseHead(status: number, reason: string, headers: RawHeaders): void;
  /** A piece of the body: a view into the bytes given to `execute`, not a copy. May be empty. */
  responseBody(chunk: Buffer, last: boolean): void;
}

export class ResponseParseError extends Error {
  override readonly name = 'ResponseParseError';
}

type State =
  | 'idle'
  | 'head'
  | 'body-length'
  | 'body-close'
  | 'chunk-line'
  | 'chunk-data'
  | 'chunk-data-end'
  | 'trailers'
  | 'done';

const tokenPattern = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Field values: visible characters, spaces, tabs and obs-text; no other control character. */
const valuePattern = /^[\t\x20-\x7e\x80-\xff]*$/;
const statusLinePattern = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: ([\t\x20-\x7e\x80-\xff]*))?$/;
const digitsPattern = /^\d{1,15}$/;
const chunkSizePattern = /^[0-9A-Fa-f]{1,12}$/;

/**
 * One connection's response parser. Call `expect` before each request's response, `execute` with
 * every chunk of bytes read, and `end` when the connection closes. Errors are thrown as
 * ResponseParseError; after one, the connection must not be used again.
 */
export class ResponseParser {
  private state: State = 'idle';
  private headRequest = false;
  /** Bytes of an unfinished head, trailer section, chunk-size line or CRLF after chunk data. */
  private pending: Buffer | null = null;
  /** Where `pending` is kept when this parser copied it: room to grow without copying it again. */
  private store: Buffer | null = null;
  private remaining = 0;
  /** The response that completed may be followed by another request on the same connection. */
  private reusable = false;
  /** The framing of the current response's body, once its head is read. */
  framing: BodyFraming | null = null;

  constructor(private readonly sink: ResponseSink) {}

  /** A new request went out; `headRequest` when it was HEAD (whose response never has a body). */
  expect(headRequest: boolean): void {
    if (this.state !== 'idle' && this.state !== 'done')
      throw new ResponseParseError('a request was sent before the previous response ended');
    this.state = 'head';
    this.headRequest = headRequest;
    this.pending = null;
    this.framing = null;
    this.reusable = false;
  }

  /** The last response was read to its end. */
  get complete(): boolean {
    return this.state === 'done';
  }

  /** The response's head has been read (its body may not have). */
  get headRead(): boolean {
    return this.framing !== null;
  }

  /** The connection may carry another request: the last response ended cleanly and allowed it. */
  get keepAlive(): boolean {
    return this.state === 'done' && this.reusable;
  }

  execute(data: Buffer): void {
    let offset = 0;
    while (offset < data.length) {
      switch (this.state) {
        case 'idle':
          throw new ResponseParseError('the upstream sent data nobody asked for');
        case 'done':
          // Bytes after a complete response: the response stands (it was read to its end), but a
          // connection that sends what nobody asked for is not used again.
          this.reusable = false;
          return;
        case 'head':
        case 'trailers':
          offset = this.readBlock(data, offset);
          break;
        case 'body-length':
          offset = this.readCounted(data, offset, 'done');
          break;
        case 'body-close':
          this.sink.responseBody(offset === 0 ? data : data.subarray(offset), false);
          offset = data.length;
          break;
        case 'chunk-line':
          offset = this.readChunkLine(data, offset);
          break;
        case 'chunk-data':
          offset = this.readCounted(data, offset, 'chunk-data-end');
          break;
        case 'chunk-data-end':
          offset = this.readChunkDataEnd(data, offset);
          break;
        default: {
          const never: never = this.state;
          throw new Error(`unknown parser state ${String(never)}`);
        }
      }
    }
  }

  /**
   * The connection closed (cleanly: an error is a cut). Ends a body delimited by the close; answers
   * whether the response was complete. A close before the head, or in a framed body, is a cut.
   */
  end(): boolean {
    if (this.state === 'body-close') {
      this.state = 'done';
      this.reusable = false;
      this.sink.responseBody(Buffer.alloc(0), true);
    }
    return this.state === 'done';
  }

  /**
   * Reads up to `remaining` body bytes (a fixed-length body, or one chunk's data), moving to `then`
   * once they are all read; returns the offset after them. The end of a fixed-length body is the
   * response's last piece.
   */
  private readCounted(data: Buffer, offset: number, then: 'done' | 'chunk-data-end'): number {
    const take = Math.min(this.remaining, data.length - offset);
    this.remaining -= take;
    const ended = this.remaining === 0;
    if (ended) this.state = then;
    this.sink.responseBody(data.subarray(offset, offset + take), ended && then === 'done');
    return offset + take;
  }

  /** Reads a head or a trailer section up to its empty line; returns the offset after it. */
  private readBlock(data: Buffer, offset: number): number {
    // Bytes kept from earlier calls were scanned for bare line feeds when they came.
    const scanned = this.pending?.length ?? 0;
    const block = this.gather(data, offset, crlfcrlf, maxResponseHeadBytes);
    // A line ending in a bare LF would leave the block waiting for a CRLFCRLF that never comes:
    // refused as soon as it is seen, whether the block is complete or not.
    const bytes = block?.bytes ?? (this.pending as Buffer);
    const start = block?.start ?? 0;
    const lineFeed = bareLineFeed(bytes, start, Math.max(start, scanned), block?.end);
    if (lineFeed) throw new ResponseParseError(bareLineFeedMessage(this.state));
    if (block === null) return data.length;
    if (this.state === 'head') this.head(block.bytes.toString('latin1', block.start, block.end));
    // The trailer section's bytes begin with the CRLF of the last chunk's line (see readChunkLine).
    else
      this.finishTrailers(
        block.bytes.toString('latin1', block.start + 2, Math.max(block.start + 2, block.end)),
      );
    return block.next;
  }

  /**
   * Finds `delimiter` in the bytes kept from earlier calls followed by `data` from `offset`. Answers
   * the bytes, where the block starts and ends (the delimiter's first byte) in them, and the offset in
   * `data` just after the delimiter; or null when the delimiter has not arrived yet, keeping the bytes
   * for the next call. A block over `limit` bytes is an error.
   */
  private gather(
    data: Buffer,
    offset: number,
    delimiter: Buffer,
    limit: number,
  ): { bytes: Buffer; start: number; end: number; next: number } | null {
    const kept = this.pending;
    const bytes = kept === null ? data : this.append(kept, data.subarray(offset));
    const start = kept === null ? offset : 0;
    const searchFrom = kept === null ? offset : Math.max(0, kept.length - delimiter.length + 1);
    const end = bytes.indexOf(delimiter, searchFrom);
    // Without the delimiter, the last bytes may be its beginning: they do not count yet.
    const blockLength = end < 0 ? bytes.length - start - (delimiter.length - 1) : end - start;
    if (blockLength > limit) throw new ResponseParseError(tooLong(this.state, limit));
    if (end < 0) {
      this.pending = kept === null ? this.append(emptyBytes, data.subarray(offset)) : bytes;
      return null;
    }
    this.pending = null;
    this.store = null;
    const next = kept === null ? end + delimiter.length : offset + end + delimiter.length - kept.length;
    return { bytes, start, end, next };
  }

  /**
   * `kept` followed by `data`, in `store`, grown by doubling: a block that arrives in many small
   * reads is copied O(n) times in all, not once per read (O(n²) up to the 64 KiB of a head).
   */
  private append(kept: Buffer, data: Buffer): Buffer {
    const length = kept.length + data.length;
    let store = this.store;
    const inStore = store !== null && kept.buffer === store.buffer && kept.byteOffset === store.byteOffset;
    if (!inStore || (store as Buffer).length < length) {
      const grown = Buffer.allocUnsafe(Math.max(2 * length, minStoreBytes));
      kept.copy(grown, 0);
      store = grown;
      this.store = grown;
    }
    data.copy(store as Buffer, kept.length);
    return (store as Buffer).subarray(0, length);
  }

  private head(text: string): void {
    // Line by line without splitting into an array: this runs once per proxied response.
    const statusEnd = lineEnd(text, 0);
    const statusText = text.slice(0, statusEnd);
    const statusLine = statusLinePattern.exec(statusText);
    if (!statusLine)
      throw new ResponseParseError(`the upstream's status line is not HTTP/1.x: ${quote(statusText)}`);
    const http10 = statusLine[1] === '0';
    const status = Number(statusLine[2]);
    const headers: RawHeaders = [];
    let contentLength: string | null = null;
    let transferEncoding: string | null = null;
    let close = false;
    let keepAlive = false;
    for (let start = statusEnd + 2; start <= text.length; ) {
      const end = lineEnd(text, start);
      const colon = text.indexOf(':', start);
      const nameEnd = colon > start && colon < end ? colon : start;
      if (!isToken(text, start, nameEnd))
        throw new ResponseParseError(
          `the upstream sent a malformed header line: ${quote(text.slice(start, end))}`,
        );
      const name = text.slice(start, nameEnd);
      const value = trimmedSlice(text, nameEnd + 1, end);
      if (!isFieldValue(value))
        throw new ResponseParseError(`the upstream's ${name} header holds a control character`);
      start = end + 2;
      const length = name.length;
      const lower = length === 10 || length === 14 || length === 17 ? name.toLowerCase() : '';
      if (lower === 'content-length') {
        if (!digitsPattern.test(value) || (contentLength !== null && contentLength !== value))
          throw new ResponseParseError(`the upstream sent Content-Length ${quote(value)}`);
        // The same length repeated is one length (RFC 9110 §8.6): forwarded once.
        if (contentLength !== null) continue;
        contentLength = value;
      }
      headers.push(name, value);
      if (lower === 'transfer-encoding') {
        transferEncoding = transferEncoding === null ? value : `${transferEncoding}, ${value}`;
      } else if (lower === 'connection') {
        for (const token of value.split(',')) {
          const t = token.trim().toLowerCase();
          if (t === 'close') close = true;
          else if (t === 'keep-alive') keepAlive = true;
        }
      }
    }
    if (status < 200) {
      // 100 Continue, 102, 103 Early Hints: interim; the final response follows on the connection.
      if (status === 101) throw new ResponseParseError('the upstream switched protocols (not supported)');
      this.state = 'head';
      return;
    }
    this.reusable = http10 ? keepAlive && !close : !close;
    let framing: BodyFraming;
    if (this.headRequest || status === 204 || status === 304) framing = 'none';
    else if (transferEncoding !== null) {
      // Both framings at once is how responses are smuggled (RFC 9112 §6.3 allows reading it by
      // Transfer-Encoding, but the Content-Length would go on to the client): refused, as Node does.
      if (contentLength !== null)
        throw new ResponseParseError('the upstream sent both Transfer-Encoding and Content-Length');
      // Only plain chunked, as nginx: the router re-frames the body for its client, so another
      // coding would be lost on the way (and one not ending in chunked leaves the end to a close).
      if (transferEncoding.trim().toLowerCase() !== 'chunked')
        throw new ResponseParseError(
          `the upstream sent Transfer-Encoding ${quote(transferEncoding)} (only chunked is supported)`,
        );
      framing = 'chunked';
    } else if (contentLength !== null) framing = contentLength === '0' ? 'none' : 'length';
    else framing = 'close';
    if (framing === 'close') this.reusable = false;
    this.framing = framing;
    this.sink.responseHead(status, statusLine[3] ?? '', headers);
    switch (framing) {
      case 'none':
        this.state = 'done';
        this.sink.responseBody(emptyBody, true);
        break;
      case 'length':
        this.state = 'body-length';
        this.remaining = Number(contentLength);
        break;
      case 'chunked':
        this.state = 'chunk-line';
        break;
      case 'close':
        this.state = 'body-close';
        break;
      default: {
        const never: never = framing;
        throw new Error(`unknown framing ${String(never)}`);
      }
    }
  }

  private readChunkLine(data: Buffer, offset: number): number {
    const block = this.gather(data, offset, crlf, maxChunkLineBytes);
    if (block === null) return data.length;
    const line = block.bytes.toString('latin1', block.start, block.end);
    const semicolon = line.indexOf(';');
    const size = trimWhitespace(semicolon < 0 ? line : line.slice(0, semicolon), 0);
    if (!chunkSizePattern.test(size) || !valuePattern.test(line))
      throw new ResponseParseError(`the upstream sent a malformed chunk size: ${quote(line)}`);
    this.remaining = Number.parseInt(size, 16);
    if (this.remaining > 0) this.state = 'chunk-data';
    else {
      // The trailer section ends at the first empty line: with the last chunk's CRLF put back in
      // front, that is the first CRLFCRLF, whether there are trailer fields or not.
      this.state = 'trailers';
      this.pending = crlf;
    }
    return block.next;
  }

  private readChunkDataEnd(data: Buffer, offset: number): number {
    const block = this.gather(data, offset, crlf, 0);
    if (block === null) return data.length;
    this.state = 'chunk-line';
    return block.next;
  }

  private finishTrailers(text: string): void {
    // Trailer fields are dropped (as nginx does by default), but must still be well-formed.
    if (text !== '')
      for (const line of text.split('\r\n')) {
        const colon = line.indexOf(':');
        if (colon <= 0 || !tokenPattern.test(line.slice(0, colon)) || !valuePattern.test(line))
          throw new ResponseParseError(`the upstream sent a malformed trailer line: ${quote(line)}`);
      }
    this.state = 'done';
    this.sink.responseBody(emptyBody, true);
  }
}

const crlf = Buffer.from('\r\n', 'latin1');
const crlfcrlf = Buffer.from('\r\n\r\n', 'latin1');
const emptyBody = Buffer.alloc(0);

/**
 * `text` from `start` without leading and trailing spaces and tabs (RFC 9110's OWS). Not
 * String.trim: it also strips U+00A0, which is the last byte of many UTF-8 characters read as latin1.
 */
function trimWhitespace(text: string, start: number): string {
  let from = start;
  let to = text.length;
  while (from < to && isWhitespace(text.charCodeAt(from))) from++;
  while (to > from && isWhitespace(text.charCodeAt(to - 1))) to--;
  return from === 0 && to === text.length ? text : text.slice(from, to);
}

/**
 * Whether a line of the block from `start` ends in a bare LF, looking at the line feeds from `from`
 * on (those before were looked at already: a block kept across reads is not scanned again).
 */
function bareLineFeed(bytes: Buffer, start: number, from: number, end = bytes.length): boolean {
  for (let i = bytes.indexOf(lineFeedByte, from); i >= 0 && i < end; i = bytes.indexOf(lineFeedByte, i + 1))
    if (i === start || bytes[i - 1] !== carriageReturnByte) return true;
  return false;
}

/** Where the line starting at `start` ends: its CRLF, or the end of `text` (the block's last line). */
function lineEnd(text: string, start: number): number {
  const end = text.indexOf('\r\n', start);
  return end < 0 ? text.length : end;
}

/** Token characters (RFC 9110 §5.6.2), by character code. */
const tokenCodes = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
  tokenCodes[c.charCodeAt(0)] = 1;

/** Whether `text` from `start` to `end` is a token (not empty): what tokenPattern tests, without a slice. */
function isToken(text: string, start: number, end: number): boolean {
  if (end <= start) return false;
  for (let i = start; i < end; i++) {
    const code = text.charCodeAt(i);
    if (code > 0xff || tokenCodes[code] === 0) return false;
  }
  return true;
}

/** What valuePattern tests: tabs, visible characters, spaces and obs-text only. */
function isFieldValue(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code === 0x7f || code > 0xff) return false;
  }
  return true;
}

/** `text` from `start` to `end` without leading and trailing spaces and tabs (as trimWhitespace). */
function trimmedSlice(text: string, start: number, end: number): string {
  let from = start;
  let to = end;
  while (from < to && isWhitespace(text.charCodeAt(from))) from++;
  while (to > from && isWhitespace(text.charCodeAt(to - 1))) to--;
  return text.slice(from, to);
}

const lineFeedByte = 0x0a;
const emptyBytes = Buffer.alloc(0);
/** The smallest store for kept bytes (most heads arrive whole: none is needed). */
const minStoreBytes = 256;
const carriageReturnByte = 0x0d;

function bareLineFeedMessage(state: State): string {
  const where = state === 'head' ? 'response head' : 'trailer section';
  return `the upstream's ${where} has a line ending in a bare line feed (HTTP/1.1 requires CRLF)`;
}

function isWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

function tooLong(state: State, limit: number): string {
  if (state === 'head') return `the upstream's response head is over ${limit} bytes`;
  if (state === 'trailers') return `the upstream's trailer section is over ${limit} bytes`;
  if (state === 'chunk-data-end') return 'the upstream sent chunk data longer than its size';
  return `the upstream sent a chunk-size line over ${limit} bytes`;
}

function quote(text: string): string {
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
}
