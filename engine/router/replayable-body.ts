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
 * body holds only what it sent. Past it, a body is streamed rather than kept (as a large one).
 */
export const bufferedBodiesMaxBytes = 64 * 1024 * 1024;

/** The router's memory for buffered bodies, shared by all of its requests. */
export class BodyBudget {
  private used = 0;

  constructor(readonly maxBytes = bufferedBodiesMaxBytes) {}

  /** Takes `bytes` if they fit under the cap. */
  take(bytes: number): boolean {
    if (this.used + bytes > this.maxBytes) return false;
    this.used += bytes;
    return true;
  }

  /** Takes `bytes` whether or not they fit (a piece already read must be held until it is sent). */
  force(bytes: number): void {
    this.used += bytes;
  }

  give(bytes: number): void {
    this.used -= bytes;
  }

  get usedBytes(): number {
    return this.used;
  }
}

/** Where a body goes: an upstream exchange (upstream-pool.ts). */
export interface BodySink {
  readonly destroyed: boolean;
  /** False when the sink's buffer is full: wait for `onceDrain`. */
  write(chunk: Buffer): boolean;
  end(): void;
  onceDrain(listener: () => void): void;
}

/** The proxy's side of a body being read. */
export interface BodyReader {
  /** The body is read to its end, or as far as it is kept before streaming: take a connection now. */
  bodyReady(): void;
  /** The client sent no byte of its body for the route's bodyTimeout. */
  bodyTimedOut(): void;
}

/**
 * A client's request body: read before the request takes an upstream connection (up to
 * `bufferedBodyMaxBytes`), then sent to the upstream, and sent again to another one if the first
 * failed before answering. A larger body streams from the client to the upstream with backpressure.
 *
 * Invariants: every byte read from the client goes to the current target, or is held until there is
 * one; while `replayable`, every byte read so far is held. The client's silence is timed only while
 * the router is reading: not while it holds back because no upstream takes the body yet.
 */
export class ReplayableBody {
  private chunks: Buffer[] = [];
  /** Bytes in `chunks`, all taken from the budget. */
  private held = 0;
  private received = 0;
  private ended = false;
  /** Past the buffered size (or the budget): held bytes are dropped once sent. */
  private streaming = false;
  private ready = false;
  private target: BodySink | null = null;
  private reading = false;
  /** Over: nothing more is held or sent. */
  private finished = false;
  private timer: NodeJS.Timeout | null = null;
  private reader: BodyReader | null = null;

  constructor(
    private readonly source: IncomingMessage,
    private readonly budget: BodyBudget,
    private readonly timeoutMs: number,
    private readonly maxBytes = bufferedBodyMaxBytes,
  ) {}

  /** True while the whole body read so far is held: the request may go to another upstream. */
  get replayable(): boolean {
    return this.held === this.received && !this.finished;
  }

  /** Whether the body is read far enough to go upstream (`bodyReady` was called). */
  get isReady(): boolean {
    return this.ready;
  }

  /** Starts reading; `reader.bodyReady()` once the body is read or too large to keep whole. */
  read(reader: BodyReader): void {
    if (this.reading) return;
    this.reading = true;
    this.reader = reader;
    this.source.on('data', (chunk: Buffer) => this.onData(chunk));
    this.source.on('end', () => this.onEnd());
    this.startTimer();
  }

  /** Sends the body held so far to `target`, then the rest as it arrives. */
  attach(target: BodySink): void {
    this.target = target;
    for (const chunk of this.chunks) target.write(chunk);
    if (this.streaming) this.dropHeld();
    if (this.ended) {
      target.end();
      return;
    }
    if (this.source.isPaused()) {
      this.source.resume();
      this.startTimer();
    }
  }

  /** The upstream answered: the body will not be sent again, so stop holding it. */
  commit(): void {
    this.streaming = true;
    if (this.target) this.dropHeld();
  }

  /** The exchange is over (answered, refused, or the client went away): release memory and timer. */
  close(): void {
    this.finished = true;
    this.stopTimer();
    this.dropHeld();
  }

  private onData(chunk: Buffer): void {
    if (this.finished) return;
    this.timer?.refresh();
    this.received += chunk.length;
    const target = this.target;
    if (!this.streaming || !target) this.hold(chunk);
    if (target && !target.destroyed && !target.write(chunk)) {
      this.pauseSource();
      target.onceDrain(() => {
        if (this.target === target && !this.finished) {
          this.source.resume();
          this.startTimer();
        }
      });
    }
    if (!this.ready && this.streaming) {
      // Too large to keep whole: no more is read until an upstream connection takes it.
      this.pauseSource();
      this.signalReady();
    }
  }

  private hold(chunk: Buffer): void {
    if (!this.streaming && this.held + chunk.length <= this.maxBytes && this.budget.take(chunk.length)) {
      this.chunks.push(chunk);
      this.held += chunk.length;
      return;
    }
    this.streaming = true;
    if (this.target) {
      // Sent already (the caller writes it): nothing held from here on.
      this.dropHeld();
      return;
    }
    this.budget.force(chunk.length);
    this.chunks.push(chunk);
    this.held += chunk.length;
  }

  private onEnd(): void {
    this.ended = true;
    this.stopTimer();
    this.target?.end();
    this.signalReady();
  }

  private signalReady(): void {
    if (this.ready) return;
    this.ready = true;
    this.reader?.bodyReady();
  }

  private pauseSource(): void {
    this.source.pause();
    this.stopTimer();
  }

  private startTimer(): void {
    if (this.ended || this.finished) return;
    if (this.timer) {
      this.timer.refresh();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.ended && !this.finished) this.reader?.bodyTimedOut();
    }, this.timeoutMs);
  }

  private stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private dropHeld(): void {
    this.budget.give(this.held);
    this.chunks = [];
    this.held = 0;
  }
}
