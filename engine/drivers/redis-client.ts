/**
 * A minimal Redis client for the redis driver (redis-*.ts): RESP2 over one loopback TCP connection
 * per call, commands sent pipelined and answered in order. Written here rather than spawning
 * redis-cli per command: a switch's catch-up polls every 10 ms inside the write hold (a process per
 * poll costs more than the poll), and a fence must send CLIENT UNPAUSE on the same connection as its
 * CLIENT PAUSE, so the two run in that order even when the server answers neither in time.
 */
import { connect, type Socket } from 'node:net';

/** A reply: a status or bulk string, an integer, null, or an array of replies. */
export type Reply = string | number | null | Reply[];

/** An error reply of the server (`-ERR …`, `-READONLY …`): it answered, and refused. */
export class RedisReplyError extends Error {
  override readonly name = 'RedisReplyError';
}

/** The server could not be reached or did not answer in time (`unreachable`: nothing listens). */
export class RedisConnectionError extends Error {
  override readonly name = 'RedisConnectionError';
  constructor(
    message: string,
    readonly unreachable: boolean,
  ) {
    super(message);
  }
}

export interface RedisCallOptions {
  signal: AbortSignal;
  /** The whole call's bound (connect, send, every reply). */
  timeoutMs: number;
  /**
   * Sent (without waiting for their replies) when the call times out, on the same connection, before
   * it is closed: the server runs them right after what it was sent before, whenever it gets to it.
   */
  onTimeout?: string[][];
}

/** One command's reply; an error reply rejects with RedisReplyError. */
export async function redis(port: number, args: string[], options: RedisCallOptions): Promise<Reply> {
  const [reply] = await redisPipeline(port, [args], options);
  if (reply instanceof RedisReplyError) throw reply;
  return reply as Reply;
}

/**
 * The replies of `commands`, sent at once on one connection to 127.0.0.1:`port`, in order; an error
 * reply is returned in its place (a RedisReplyError), not thrown.
 */
export function redisPipeline(
  port: number,
  commands: string[][],
  options: RedisCallOptions,
): Promise<(Reply | RedisReplyError)[]> {
  options.signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const socket: Socket = connect({ host: '127.0.0.1', port });
    const parser = new ReplyParser();
    const replies: (Reply | RedisReplyError)[] = [];
    let settled = false;
    const finish = (error: Error | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      if (error) {
        socket.destroy();
        reject(error);
      } else {
        socket.end();
        resolve(replies);
      }
    };
    const onAbort = () => finish(options.signal.reason as Error);
    options.signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => {
      if (options.onTimeout && options.onTimeout.length > 0 && !socket.destroyed) {
        // The server answers these (and closes) once it is free again; nothing waits for that.
        socket.end(encode(options.onTimeout));
        socket.unref();
        settled = true;
        options.signal.removeEventListener('abort', onAbort);
        reject(
          new RedisConnectionError(
            `redis on 127.0.0.1:${port} did not answer within ${options.timeoutMs} ms`,
            false,
          ),
        );
        return;
      }
      finish(
        new RedisConnectionError(
          `redis on 127.0.0.1:${port} did not answer within ${options.timeoutMs} ms`,
          false,
        ),
      );
    }, options.timeoutMs);
    socket.setNoDelay(true);
    socket.on('connect', () => socket.write(encode(commands)));
    socket.on('data', (chunk: Buffer) => {
      try {
        parser.push(chunk);
        for (let reply = parser.next(); reply !== undefined; reply = parser.next()) {
          replies.push(reply);
          if (replies.length === commands.length) return finish(null);
        }
      } catch (error) {
        finish(error as Error);
      }
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      const unreachable = error.code === 'ECONNREFUSED';
      finish(new RedisConnectionError(`redis on 127.0.0.1:${port}: ${error.message}`, unreachable));
    });
    socket.on('close', () =>
      finish(new RedisConnectionError(`redis on 127.0.0.1:${port} closed the connection`, false)),
    );
  });
}

function encode(commands: string[][]): Buffer {
  const parts: Buffer[] = [];
  for (const args of commands) {
    parts.push(Buffer.from(`*${args.length}\r\n`));
    for (const arg of args) {
      const bytes = Buffer.from(arg, 'utf8');
      parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
    }
  }
  return Buffer.concat(parts);
}

/** Incremental RESP2 parsing: next() is a whole reply, or undefined until more bytes arrive. */
class ReplyParser {
  private buffer = Buffer.alloc(0);
  private offset = 0;

  push(chunk: Buffer) {
    this.buffer = Buffer.concat([this.buffer.subarray(this.offset), chunk]);
    this.offset = 0;
  }

  next(): Reply | RedisReplyError | undefined {
    const start = this.offset;
    const reply = this.read();
    if (reply === undefined) this.offset = start;
    return reply;
  }

  private line(): string | undefined {
    const end = this.buffer.indexOf('\r\n', this.offset);
    if (end < 0) return undefined;
    const text = this.buffer.toString('utf8', this.offset, end);
    this.offset = end + 2;
    return text;
  }

  private read(): Reply | RedisReplyError | undefined {
    const line = this.line();
    if (line === undefined) return undefined;
    const body = line.slice(1);
    switch (line[0]) {
      case '+':
        return body;
      case '-':
        return new RedisReplyError(body);
      case ':':
        return Number(body);
      case '$': {
        const length = Number(body);
        if (length < 0) return null;
        if (this.buffer.length < this.offset + length + 2) return undefined;
        const text = this.buffer.toString('utf8', this.offset, this.offset + length);
        this.offset += length + 2;
        return text;
      }
      case '*': {
        const count = Number(body);
        if (count < 0) return null;
        const items: Reply[] = [];
        for (let i = 0; i < count; i++) {
          const item = this.read();
          if (item === undefined) return undefined;
          items.push(item instanceof RedisReplyError ? null : item);
        }
        return items;
      }
      default:
        throw new Error(`not a RESP reply: ${JSON.stringify(line.slice(0, 40))}`);
    }
  }
}

/** `INFO <section>` as a record of its `field:value` lines. */
export function parseInfo(text: Reply | RedisReplyError | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof text !== 'string') return out;
  for (const line of text.split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) out[line.slice(0, at)] = line.slice(at + 1);
  }
  return out;
}
