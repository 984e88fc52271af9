/**
 * One request and its response on a client connection the router reads itself
 * (http1-connection.ts): the part of Node's IncomingMessage and ServerResponse the proxy uses
 * (proxy-request.ts, write-holds.ts, edge-answers.ts, proxy-upgrade.ts), without their streams.
 * Node's pair costs 11–16 µs of CPU per request (docs/performance.md); these are plain objects
 * with an event emitter, and the response's head and first body chunk go out in one write.
 *
 * Events, as Node's: the request emits 'data' and 'end' for its body (only while someone listens
 * and it is not paused; bytes wait in it until then); the response 'drain' when the socket drains,
 * and 'close' once, when the response is over (ended, or the client gone).
 */
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { RequestHead } from './request-head.js';

/** What the response needs of its connection. */
export interface ExchangeConnection {
  readonly socket: Socket;
  /** `Keep-Alive: timeout=…`, in seconds. */
  readonly keepAliveSeconds: number;
  /** The current `Date` header value (cached per second by the server). */
  date(): string;
  /** The request's body is wanted now (a 'data' listener came, or the request resumed). */
  bodyWanted(): void;
}

export class Http1Request extends EventEmitter {
  method: string;
  url: string;
  readonly httpVersionMajor: number;
  readonly httpVersionMinor: number;
  readonly rawHeaders: string[];
  /** The whole body was read from the connection (not necessarily taken by a listener yet). */
  complete: boolean;
  /** Body bytes read but not yet emitted. */
  private queued: Buffer[] = [];
  /** The first chunk of `queued` not given yet, and the bytes from there (a trickled body comes in many small chunks). */
  private queuedStart = 0;
  private queuedLength = 0;
  paused = false;
  private ended = false;
  private headersObject: IncomingHttpHeaders | null = null;

  constructor(
    head: RequestHead,
    readonly socket: Socket,
    private readonly connection: ExchangeConnection,
  ) {
    super();
    this.method = head.method;
    this.url = head.url;
    this.httpVersionMajor = head.httpVersionMajor;
    this.httpVersionMinor = head.httpVersionMinor;
    this.rawHeaders = head.rawHeaders;
    this.complete = head.body.kind === 'none';
  }

  get httpVersion(): string {
    return `${this.httpVersionMajor}.${this.httpVersionMinor}`;
  }

  /** Lower-case names, repeated values joined with ', ' (as Node's for the headers the router reads). */
  get headers(): IncomingHttpHeaders {
    if (this.headersObject) return this.headersObject;
    const headers: Record<string, string> = {};
    const raw = this.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      const name = (raw[i] as string).toLowerCase();
      const value = raw[i + 1] as string;
      const before = headers[name];
      headers[name] = before === undefined ? value : `${before}, ${value}`;
    }
    this.headersObject = headers;
    return headers;
  }

  override on(event: string | symbol, listener: (...args: never[]) => void): this {
    super.on(event, listener as (...args: unknown[]) => void);
    if (event === 'data' && !this.paused) process.nextTick(() => this.connection.bodyWanted());
    return this;
  }

  pause(): this {
    this.paused = true;
    return this;
  }

  resume(): this {
    if (!this.paused && this.listenerCount('data') > 0) return this;
    this.paused = false;
    process.nextTick(() => this.connection.bodyWanted());
    return this;
  }

  /** Whether body bytes go to a listener now. */
  get flowing(): boolean {
    return !this.paused && this.listenerCount('data') > 0;
  }

  /** Body bytes from the connection: to the listener now, or kept until one takes them. */
  push(chunk: Buffer): void {
    if (this.queuedLength === 0 && this.flowing) this.emit('data', chunk);
    else {
      this.queued.push(chunk);
      this.queuedLength += chunk.length;
    }
  }

  /** Bytes kept for a listener, in all. */
  get queuedBytes(): number {
    return this.queuedLength;
  }

  /** Gives what waits to a listener that is there now; 'end' once the body is complete and given. */
  flush(): void {
    while (this.queuedStart < this.queued.length && this.flowing) {
      const chunk = this.queued[this.queuedStart++] as Buffer;
      this.queuedLength -= chunk.length;
      this.emit('data', chunk);
    }
    if (this.queuedStart === this.queued.length) {
      this.queued = [];
      this.queuedStart = 0;
    }
    if (this.complete && this.queuedLength === 0 && !this.ended && this.flowing) {
      this.ended = true;
      this.emit('end');
    }
  }
}

/** Statuses whose responses have no body (RFC 9110 §6.4.1). */
function bodiless(status: number): boolean {
  return status === 204 || status === 304 || (status >= 100 && status < 200);
}

export class Http1Response extends EventEmitter {
  statusCode = 200;
  /** The connection may carry another request after this response. */
  shouldKeepAlive: boolean;
  headersSent = false;
  writableEnded = false;
  writableFinished = false;
  destroyed = false;
  /** The head, written with the first body bytes (or at the end). */
  private head = '';
  private chunked = false;
  private hasBody: boolean;
  private extraHeaders: Record<string, string> | null = null;
  private closed = false;

  constructor(
    private readonly request: Http1Request,
    private readonly connection: ExchangeConnection,
    keepAlive: boolean,
  ) {
    super();
    this.shouldKeepAlive = keepAlive;
    this.hasBody = request.method !== 'HEAD';
  }

  get socket(): Socket | null {
    return this.destroyed ? null : this.connection.socket;
  }

  setHeader(name: string, value: string | number): this {
    this.extraHeaders ??= {};
    this.extraHeaders[name] = String(value);
    return this;
  }

  /** `headers`: Node's raw list (name, value, …) or an object. */
  writeHead(
    status: number,
    reasonOrHeaders?: string | Record<string, string | number> | string[],
    maybeHeaders?: Record<string, string | number> | string[],
  ): this {
    if (this.headersSent) throw new Error('the response head was already written');
    const reason = typeof reasonOrHeaders === 'string' ? reasonOrHeaders : '';
    const headers = typeof reasonOrHeaders === 'string' ? maybeHeaders : reasonOrHeaders;
    // The router's own headers are checked here; a raw list is an upstream's, which the response
    // parser checked as it read it (http1-response.ts), and the router's constants.
    const own: string[] = [];
    if (this.extraHeaders)
      for (const name in this.extraHeaders) own.push(name, this.extraHeaders[name] as string);
    if (headers && !Array.isArray(headers)) for (const name in headers) own.push(name, String(headers[name]));
    for (let i = 0; i < own.length; i += 2)
      if (!validName(own[i] as string) || !validValue(own[i + 1] as string))
        throw new Error(`invalid header ${JSON.stringify(own[i])}`);
    const list = Array.isArray(headers) ? (own.length === 0 ? headers : [...own, ...headers]) : own;
    let head = `HTTP/1.1 ${status} ${reason}\r\n`;
    let length = false;
    let connection = false;
    let date = false;
    for (let i = 0; i < list.length; i += 2) {
      const name = list[i] as string;
      const value = list[i + 1] as string;
      const size = name.length;
      if (size === 14 || size === 10 || size === 4) {
        const lower = name.toLowerCase();
        if (lower === 'content-length') length = true;
        else if (lower === 'connection') {
          connection = true;
          if (value.toLowerCase().includes('close')) this.shouldKeepAlive = false;
        } else if (lower === 'date') date = true;
      }
      head += `${name}: ${value}\r\n`;
    }
    this.statusCode = status;
    if (bodiless(status)) this.hasBody = false;
    if (!date) head += `Date: ${this.connection.date()}\r\n`;
    if (this.hasBody && !length) {
      // No length: chunked for an HTTP/1.1 client, else the body ends when the connection does.
      if (this.request.httpVersionMinor === 1) {
        this.chunked = true;
        head += 'Transfer-Encoding: chunked\r\n';
      } else this.shouldKeepAlive = false;
    }
    if (!connection) {
      if (this.shouldKeepAlive)
        head += `Connection: keep-alive\r\nKeep-Alive: timeout=${this.connection.keepAliveSeconds}\r\n`;
      else head += 'Connection: close\r\n';
    }
    this.head = `${head}\r\n`;
    this.headersSent = true;
    return this;
  }

  writeContinue(): void {
    if (!this.destroyed) this.connection.socket.write('HTTP/1.1 100 Continue\r\n\r\n', 'latin1');
  }

  write(chunk: Buffer | string, encoding?: BufferEncoding): boolean {
    if (this.writableEnded || this.destroyed) return false;
    if (!this.headersSent) this.writeHead(this.statusCode);
    return this.send(chunk, encoding ?? 'utf8', '');
  }

  end(chunk?: Buffer | string, encoding?: BufferEncoding): this {
    if (this.writableEnded || this.destroyed) return this;
    if (!this.headersSent) {
      // A whole answer in one piece: its length is known.
      const bytes =
        chunk === undefined
          ? 0
          : typeof chunk === 'string'
            ? Buffer.byteLength(chunk, encoding)
            : chunk.length;
      this.writeHead(this.statusCode, ['Content-Length', String(bytes)]);
    }
    this.writableEnded = true;
    this.send(chunk ?? '', encoding ?? 'utf8', this.chunked ? '0\r\n\r\n' : '');
    this.writableFinished = true;
    process.nextTick(finishResponse, this);
    return this;
  }

  /** Ends the connection: the client sees the response cut. */
  destroy(): this {
    if (!this.destroyed) {
      this.destroyed = true;
      this.connection.socket.destroy();
    }
    return this;
  }

  /** The socket closed: a response not ended is over too. */
  socketClosed(): void {
    this.destroyed = true;
    this.finish();
  }

  /** @internal 'finish' and 'close', once. */
  finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.emit('finish');
    this.emit('close');
  }

  /** The head (the first time), the chunk in its framing, then `trailer`, in as few writes as may be. */
  private send(chunk: Buffer | string, encoding: BufferEncoding, trailer: string): boolean {
    const socket = this.connection.socket;
    const head = this.head;
    this.head = '';
    const size = this.hasBody
      ? typeof chunk === 'string'
        ? Buffer.byteLength(chunk, encoding)
        : chunk.length
      : 0;
    if (size === 0) {
      const text = head + trailer;
      return text === '' ? socket.writableLength === 0 : socket.write(text, 'latin1');
    }
    const framed = this.chunked;
    if (typeof chunk === 'string' && (encoding === 'latin1' || encoding === 'binary' || isAscii(chunk))) {
      const body = framed ? `${size.toString(16)}\r\n${chunk}\r\n` : chunk;
      return socket.write(head + body + trailer, 'latin1');
    }
    const before = head + (framed ? `${size.toString(16)}\r\n` : '');
    const after = (framed ? '\r\n' : '') + trailer;
    if (before === '' && after === '') return socket.write(chunk, encoding);
    socket.cork();
    if (before !== '') socket.write(before, 'latin1');
    socket.write(chunk, encoding);
    const more =
      after === '' ? socket.writableLength < socket.writableHighWaterMark : socket.write(after, 'latin1');
    socket.uncork();
    return more;
  }
}

function finishResponse(response: Http1Response): void {
  response.finish();
}

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** A header value Node would send: no control character but HTAB, nothing past latin1. */
function validValue(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code === 0x7f || code > 0xff) return false;
  }
  return true;
}

function validName(name: string): boolean {
  if (name.length === 0) return false;
  for (let i = 0; i < name.length; i++) {
    const code = name.charCodeAt(i);
    if (code <= 0x20 || code >= 0x7f || code === 0x3a) return false;
  }
  return true;
}
