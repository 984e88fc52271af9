import type { ServerResponse } from 'node:http';
/**
 * Live log streams (`GET /v1/migrations/:id/logs?follow=true`): bounded in number, and cheap in
 * number. Each client (a token, or an address when auth is off) may hold so many open at once, and
 * the server so many in all; beyond, 429. Streams of one migration share one reader of its log
 * (in local mode the reader polls the state directory, in Temporal mode it queries the workflow):
 * the cost of following grows with the migrations followed, not with the streams.
 */

import type { MigrationSummary } from '../core/migration/summary.js';
import type { LogLine } from '../core/migration/types.js';
import type { MigrationService } from '../engine/services/migration-service.js';
import { HttpProblem } from './problems.js';

export interface LogStreamLimits {
  /** Streams one client may hold open at once. */
  perClient: number;
  /** Streams the server holds open at once, over every client. */
  total: number;
}

export const defaultLogStreamLimits: LogStreamLimits = { perClient: 20, total: 200 };

/** What a refused client is told to wait: a slot frees when some stream ends, at no known time. */
const refusedRetryAfterS = 10;

/** One migration's log as it is read, shared by every stream following it. */
class SharedLog {
  /**
   * Every line read so far: the whole log is held in memory for as long as any stream follows it
   * (a stream that joins late starts from the first line), and let go with the last stream.
   */
  readonly lines: LogLine[] = [];
  /** Set once the log has ended: the migration's summary, or what stopped the reading. */
  end: { summary: MigrationSummary } | { error: unknown } | null = null;
  subscribers = 0;
  private readonly reader = new AbortController();
  private waiters = new Set<() => void>();

  constructor(service: MigrationService, id: string, onError: () => void) {
    void this.read(service, id).catch((error: unknown) => {
      this.end = { error };
      onError();
      this.wake();
    });
  }

  private async read(service: MigrationService, id: string): Promise<void> {
    for await (const line of service.logs(id, { follow: true, signal: this.reader.signal })) {
      this.lines.push(line);
      this.wake();
    }
    if (this.reader.signal.aborted) return; // nobody follows any more
    this.end = { summary: (await service.show(id)).summary };
    this.wake();
  }

  /**
   * Resolves at the next line or end, or when `signal` aborts. Either way the waiter is gone at
   * once: a stream that stops on a quiet log leaves nothing behind for its next line.
   */
  changed(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      this.waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  stop(): void {
    this.reader.abort();
    this.wake();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = new Set();
    for (const wake of waiters) wake();
  }
}

/** A client as the limits count it: a key, and how messages name it ("token ci", "address …"). */
export interface StreamClient {
  key: string;
  label: string;
}

export class LogStreams {
  private readonly openBy = new Map<string, number>();
  private total = 0;
  private readonly logs = new Map<string, SharedLog>();

  constructor(
    private readonly service: MigrationService,
    private readonly limits: LogStreamLimits,
  ) {}

  /** Streams open now. */
  get open(): number {
    return this.total;
  }

  /** Migration logs being read now (one reader each, whatever the number of streams). */
  get readers(): number {
    return this.logs.size;
  }

  /**
   * Takes a stream slot for `client`, or refuses (429 TOO_MANY_LOG_STREAMS, with Retry-After).
   * Call the function returned, once, when the stream has ended.
   */
  acquire(client: StreamClient): () => void {
    const held = this.openBy.get(client.key) ?? 0;
    const advice = `retry in a while, or read the log without follow=true`;
    if (held >= this.limits.perClient) {
      throw refused(
        `${client.label} has ${held} log streams open, the most one client may (--max-log-streams-per-token); close one, ${advice}`,
      );
    }
    if (this.total >= this.limits.total) {
      throw refused(
        `the server has ${this.total} log streams open, the most it allows (--max-log-streams); ${advice}`,
      );
    }
    this.openBy.set(client.key, held + 1);
    this.total += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total -= 1;
      const left = (this.openBy.get(client.key) ?? 1) - 1;
      if (left === 0) this.openBy.delete(client.key);
      else this.openBy.set(client.key, left);
    };
  }

  /**
   * The migration's log after its first `after` lines (from its first line by default), then each
   * line as it is written. Returns the migration's summary once it has ended, or null when
   * `signal` aborted first.
   */
  async *follow(
    id: string,
    signal: AbortSignal,
    after = 0,
  ): AsyncGenerator<LogLine, MigrationSummary | null> {
    let log = this.logs.get(id);
    if (!log) {
      const created: SharedLog = new SharedLog(this.service, id, () => {
        // A reader that failed is not shared any more: the next stream starts a fresh one.
        if (this.logs.get(id) === created) this.logs.delete(id);
      });
      log = created;
      this.logs.set(id, log);
    }
    log.subscribers += 1;
    try {
      let next = after;
      for (;;) {
        while (next < log.lines.length) yield log.lines[next++] as LogLine;
        if (log.end !== null) {
          if ('error' in log.end) throw log.end.error;
          return log.end.summary;
        }
        if (signal.aborted) return null;
        await log.changed(signal);
      }
    } finally {
      log.subscribers -= 1;
      if (log.subscribers === 0) {
        log.stop();
        if (this.logs.get(id) === log) this.logs.delete(id);
      }
    }
  }
}

function refused(detail: string): HttpProblem {
  return new HttpProblem('TOO_MANY_LOG_STREAMS', detail, {
    headers: { 'retry-after': String(refusedRetryAfterS) },
  });
}

/**
 * Starts a server-sent event stream on `out` (after the reply was hijacked): the headers every
 * stream of the server sends (no caching, no proxy buffering) and a first comment line naming it.
 */
export function openEventStream(out: ServerResponse, name: string): void {
  out.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  out.write(`: ${name}\n\n`);
}
