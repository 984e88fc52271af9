import type { IncomingMessage } from 'node:http';

/** The most of a request body kept to resend it to another upstream; beyond it, no retry. */
export const maxReplayBodyBytes = 64 * 1024;

/** Where a body goes: an upstream exchange (upstream-pool.ts). */
export interface BodySink {
  readonly destroyed: boolean;
  /** False when the sink's buffer is full: wait for `onceDrain`. */
  write(chunk: Buffer): boolean;
  end(): void;
  onceDrain(listener: () => void): void;
}

/**
 * Streams a client's request body to an upstream request, keeping the first bytes so that, when the
 * upstream fails before answering, the body can be sent again to another one. Backpressure flows
 * from the upstream socket to the client. Invariant: every byte read from the client goes to the
 * current target, and — while `replayable` — is also kept for the next.
 */
export class ReplayableBody {
  private chunks: Buffer[] = [];
  private bytes = 0;
  private ended = false;
  private target: BodySink | null = null;
  private replayableNow = true;
  private reading = false;

  constructor(
    private readonly source: IncomingMessage,
    private readonly maxBytes = maxReplayBodyBytes,
  ) {}

  /** True while the whole body read so far is kept: the request may go to another upstream. */
  get replayable(): boolean {
    return this.replayableNow;
  }

  /**
   * Sends the body read so far to `target`, then the rest as it arrives. The client's body is read
   * from the first attach on: the proxy attaches once the upstream connection is up, so a refused
   * connection consumes nothing and can be retried whatever the body's size.
   */
  attach(target: BodySink): void {
    this.target = target;
    if (!this.reading) {
      this.reading = true;
      this.source.on('data', (chunk: Buffer) => this.forward(chunk));
      this.source.on('end', () => {
        this.ended = true;
        this.target?.end();
      });
    }
    for (const chunk of this.chunks) target.write(chunk);
    if (this.ended) target.end();
    else this.source.resume();
  }

  /** The upstream answered: the body will not be sent again, so stop keeping it. */
  commit(): void {
    this.replayableNow = false;
    this.chunks = [];
  }

  /** Nobody will take the rest of the body: read and drop it, so the client is not left writing. */
  discard(): void {
    this.commit();
    this.target = null;
    if (!this.reading) {
      this.reading = true;
      this.source.on('data', () => undefined);
    }
    this.source.resume();
  }

  private forward(chunk: Buffer): void {
    if (this.replayableNow) {
      this.bytes += chunk.length;
      if (this.bytes > this.maxBytes) this.commit();
      else this.chunks.push(chunk);
    }
    const target = this.target;
    if (target && !target.destroyed && !target.write(chunk)) {
      this.source.pause();
      target.onceDrain(() => {
        if (this.target === target) this.source.resume();
      });
    }
  }
}
