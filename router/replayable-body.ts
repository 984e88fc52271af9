import type { IncomingMessage } from 'node:http';

/**
 * The most of one request body the router reads before it takes an upstream connection, and keeps
 * to send again to another upstream. 1 MiB is nginx's default client_max_body_size: every body a
 * default nginx accepts at all is read whole before an upstream sees the request, as nginx does
 * (proxy_request_buffering; nginx spools past 8-16 KiB to disk, the router keeps it in memory).
 * A larger body is streamed once its first MiB is read: it holds an upstream connection while it
 * comes, and cannot be resent.
 */
export const bufferedBodyMaxBytes = 1024 * 1024;
/**
 * The most memory all buffered bodies of one router take together: 64 bodies of the largest
 * buffered size. Counted by bytes received, not by bytes declared: a client trickling a large
 * body holds only what it sent. A real ceiling: when it is reached, bodies wait for memory (paused,
 * holding no upstream connection) rather than take more.
 */
export const bufferedBodiesMaxBytes = 64 * 1024 * 1024;

/** A body waiting for memory: `granted` runs once its `bytes` are taken for it. */
interface MemoryWaiter {
  readonly bytes: number;
  granted(): void;
}

/**
 * The router's memory for buffered bodies, shared by all of its requests.
 * Invariant: `usedBytes <= maxBytes`; bodies waiting for memory get it first come, first served.
 */
export class BodyBudget {
  private used = 0;
  private waiters: MemoryWaiter[] = [];

  constructor(readonly maxBytes = bufferedBodiesMaxBytes) {}

  /** Takes `bytes` if they fit under the cap and no body waits before them. */
  take(bytes: number): boolean {
    if (this.waiters.length > 0 || this.used + bytes > this.maxBytes) return false;
    this.used += bytes;
    return true;
  }

  /** Takes `waiter.bytes` for it as soon as they fit, then calls `granted` (at once if they do). */
  wait(waiter: MemoryWaiter): void {
    this.waiters.push(waiter);
    this.grant();
  }

  /** The waiter gave up: it takes nothing. */
  cancel(waiter: MemoryWaiter): void {
    this.waiters = this.waiters.filter((w) => w !== waiter);
    this.grant();
  }

  give(bytes: number): void {
    this.used -= bytes;
    this.grant();
  }

  get usedBytes(): number {
    return this.used;
  }

  private grant(): void {
    for (
      let next = this.waiters[0];
      next && this.used + next.bytes <= this.maxBytes;
      next = this.waiters[0]
    ) {
      this.waiters.shift();
      this.used += next.bytes;
      next.granted();
    }
  }
}

/** Where a body goes: an upstream exchange (upstream-exchange.ts). */
export interface BodySink {
  readonly destroyed: boolean;
  /** False when the sink's buffer is full: wait for `onceDrain`. */
  write(chunk: Buffer): boolean;
  end(): void;
  onceDrain(listener: () => void): void;
}

/**
 * Why a body's read was given up: the client sent nothing for the route's bodyTimeout, or the
 * router had no memory for the body for that long.
 */
export type BodyTimeoutCause = 'client-silent' | 'memory-full';

/** The proxy's side of a body being read. */
export interface BodyReader {
  /** The body is read to its end, or as far as it is kept before streaming: take a connection now. */
  bodyReady(): void;
  /** Reading the body stopped for the route's bodyTimeout; nothing more is read. */
  bodyTimedOut(cause: BodyTimeoutCause): void;
}

/**
 * Where a body is:
 * - `unread`: nothing read yet;
 * - `reading`: being read, every byte held (the client's silence is timed);
 * - `awaiting-memory`: paused, one chunk read but not yet held: the budget is full (the wait is timed);
 * - `read`: read to its end and held whole: may be sent, and sent again;
 * - `over-bound`: past `maxBytes`, paused and held, waiting for an upstream to take it;
 * - `streaming`: going from the client to the upstream as it comes, nothing held;
 * - `sent`: read to its end and sent, nothing held (the upstream answered, or the stream ended);
 * - `closed`: the exchange is over: nothing more is read, held or sent.
 */
type BodyState =
  | 'unread'
  | 'reading'
  | 'awaiting-memory'
  | 'read'
  | 'over-bound'
  | 'streaming'
  | 'sent'
  | 'closed';

/**
 * A client's request body: read before the request takes an upstream connection (up to
 * `bufferedBodyMaxBytes`), then sent to the upstream, and sent again to another one if the first
 * failed before answering. A larger body streams from the client to the upstream with backpressure.
 *
 * Invariants: every byte read from the client goes to the current target, or is held until there is
 * one; in `read` and `over-bound`, every byte read so far is held (the body is replayable). Held
 * bytes are taken from the budget before they are held; a chunk the budget cannot take yet waits
 * (`pending`), the client paused. The client's silence is timed while the router reads; the wait
 * for memory is timed too, against the same bodyTimeout, over all the body's waits (bodies that each
 * hold part of the memory and take turns at what frees must not keep each other alive); neither is
 * timed while the body holds back because no upstream takes it yet.
 */
export class ReplayableBody implements MemoryWaiter {
  private state: BodyState = 'unread';
  private chunks: Buffer[] = [];
  /** Bytes in `chunks`, all taken from the budget. */
  private held = 0;
  /** The chunk read while the budget was full, waiting for memory (not in the budget). */
  private pending: Buffer | null = null;
  private target: BodySink | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** Time spent in `awaiting-memory` before the current wait, and when the current one began. */
  private waitedMs = 0;
  private waitingSince = 0;
  private reader: BodyReader | null = null;

  constructor(
    private readonly source: IncomingMessage,
    private readonly budget: BodyBudget,
    private readonly timeoutMs: number,
    private readonly maxBytes = bufferedBodyMaxBytes,
  ) {}

  /** True while the whole body read so far is held: the request may go to another upstream. */
  get replayable(): boolean {
    return this.state === 'read' || this.state === 'over-bound';
  }

  /** Whether the body is read far enough to go upstream (`bodyReady` was called). */
  get isReady(): boolean {
    return this.state !== 'unread' && this.state !== 'reading' && this.state !== 'awaiting-memory';
  }

  /** Ready, but not read to its end: it streams, and holds its upstream connection while it comes. */
  get streamed(): boolean {
    return this.state === 'over-bound' || this.state === 'streaming';
  }

  /** The bytes of the chunk waiting for memory (as a MemoryWaiter). */
  get bytes(): number {
    return this.pending?.length ?? 0;
  }

  /** Starts reading; `reader.bodyReady()` once the body is read or too large to keep whole. */
  read(reader: BodyReader): void {
    if (this.state !== 'unread') return;
    this.state = 'reading';
    this.reader = reader;
    this.source.on('data', (chunk: Buffer) => this.onData(chunk));
    this.source.on('end', () => this.onEnd());
    this.startTimer();
  }

  /**
   * The whole body in one piece, when it is read to its end and at most `maxBytes` long (to go out
   * with the request head in one write), else null. It stays held for a resend.
   */
  whole(maxBytes: number): Buffer | null {
    if (this.state !== 'read' || this.held > maxBytes) return null;
    return this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.held);
  }

  /** Sends the body held so far to `target`, then the rest as it arrives. */
  attach(target: BodySink): void {
    if (this.state !== 'read' && this.state !== 'over-bound') return;
    this.target = target;
    for (const chunk of this.chunks) target.write(chunk);
    if (this.state === 'read') {
      target.end();
      return;
    }
    this.dropHeld();
    this.state = 'streaming';
    this.source.resume();
    this.startTimer();
  }

  /** The upstream answered: the body will not be sent again, so stop holding it. */
  commit(): void {
    if (this.state !== 'read') return;
    this.state = 'sent';
    this.dropHeld();
  }

  /** The exchange is over (answered, refused, or the client went away): nothing more is read or held. */
  close(): void {
    if (this.state === 'awaiting-memory') this.budget.cancel(this);
    this.state = 'closed';
    this.pending = null;
    this.target = null;
    this.stopTimer();
    this.dropHeld();
  }

  /** @internal The budget took the pending chunk's bytes for it. */
  granted(): void {
    const chunk = this.pending;
    this.pending = null;
    if (this.state !== 'awaiting-memory' || !chunk) return;
    this.waitedMs += Date.now() - this.waitingSince;
    this.stopTimer();
    this.state = 'reading';
    this.keep(chunk);
    if (this.state !== 'reading') return;
    this.source.resume();
    this.startTimer();
  }

  private onData(chunk: Buffer): void {
    switch (this.state) {
      case 'reading':
        this.timer?.refresh();
        if (this.budget.take(chunk.length)) this.keep(chunk);
        else this.awaitMemory(chunk);
        return;
      case 'streaming':
        this.timer?.refresh();
        this.forward(chunk);
        return;
      case 'awaiting-memory':
        // Not expected (a paused stream emits no 'data'), but a byte read must not be lost.
        this.pending = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
        return;
      case 'unread':
      case 'read':
      case 'over-bound':
      case 'sent':
      case 'closed':
        // Nothing comes before reading starts or after the end; over-bound pauses the client
        // before anything else is read; once closed, what still comes goes nowhere.
        return;
      default: {
        const never: never = this.state;
        throw new Error(`unknown body state ${String(never)}`);
      }
    }
  }

  /** Holds `chunk` (its bytes taken from the budget); past the bound, the body is ready to stream. */
  private keep(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.held += chunk.length;
    if (this.held <= this.maxBytes) return;
    // Too large to keep whole: no more is read until an upstream connection takes it.
    this.state = 'over-bound';
    this.pauseSource();
    this.reader?.bodyReady();
  }

  /**
   * The budget is full: the client is paused with this chunk until memory frees, for what is left
   * of the body's bodyTimeout for waiting.
   */
  private awaitMemory(chunk: Buffer): void {
    this.state = 'awaiting-memory';
    this.pending = chunk;
    this.pauseSource();
    this.waitingSince = Date.now();
    this.timer = setTimeout(() => this.timedOut(), Math.max(0, this.timeoutMs - this.waitedMs));
    // Last: the memory may be there at once, and `granted` runs before `wait` returns.
    this.budget.wait(this);
  }

  private forward(chunk: Buffer): void {
    const target = this.target;
    if (!target || target.destroyed || target.write(chunk)) return;
    this.pauseSource();
    target.onceDrain(() => {
      if (this.target === target && this.state === 'streaming') {
        this.source.resume();
        this.startTimer();
      }
    });
  }

  private onEnd(): void {
    this.stopTimer();
    switch (this.state) {
      case 'reading':
        this.state = 'read';
        this.reader?.bodyReady();
        return;
      case 'streaming':
        this.state = 'sent';
        this.target?.end();
        return;
      default:
        return;
    }
  }

  private pauseSource(): void {
    this.source.pause();
    this.stopTimer();
  }

  private startTimer(): void {
    if (this.timer) {
      this.timer.refresh();
      return;
    }
    this.timer = setTimeout(() => this.timedOut(), this.timeoutMs);
  }

  private timedOut(): void {
    this.timer = null;
    const cause: BodyTimeoutCause = this.state === 'awaiting-memory' ? 'memory-full' : 'client-silent';
    if (this.state !== 'reading' && this.state !== 'awaiting-memory' && this.state !== 'streaming') return;
    this.close();
    this.reader?.bodyTimedOut(cause);
  }

  private stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private dropHeld(): void {
    const held = this.held;
    this.chunks = [];
    this.held = 0;
    if (held > 0) this.budget.give(held);
  }
}
