/**
 * A server-sent event stream written by hand (`GET /v1/events`, `GET /v1/migrations/:id/logs?follow=true`):
 * counted against the log stream limits, ended by the client hanging up or the server shutting
 * down, kept alive by a comment line when idle. Everything it holds (a slot, a share of a reader,
 * the heartbeat) is taken inside one `try`, so that its `finally` gives each back whatever happens
 * between taking it and the stream's end.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { openEventStream } from './log-streams.js';
import type { RouteContext } from './route-context.js';

/** A comment line on an idle event stream, so that proxies and clients do not time it out. */
const heartbeatMs = 15_000;

export interface EventStream<Prepared> {
  /** Named in the stream's first comment line. */
  name: string;
  /**
   * Runs once the stream's slot is taken, before the reply is hijacked: what it throws is answered
   * as a problem+json (refused before anything is written).
   */
  prepare(signal: AbortSignal): Promise<Prepared>;
  /** Writes the events, once the stream is open, until they end or `signal` aborts. */
  write(out: ServerResponse, signal: AbortSignal, prepared: Prepared): Promise<void>;
}

export async function serveEventStream<Prepared>(
  request: FastifyRequest,
  reply: FastifyReply,
  context: RouteContext,
  stream: EventStream<Prepared>,
): Promise<void> {
  const reader = new AbortController();
  const stop = () => reader.abort();
  context.shutdown.addEventListener('abort', stop, { once: true });
  // The response's close is the client hanging up (the request's own 'close' only says that its
  // body has been read, long done for a GET).
  reply.raw.on('close', stop);
  const out = reply.raw;
  let release = () => {};
  let heartbeat: NodeJS.Timeout | undefined;
  let hijacked = false;
  try {
    // Refused (429) before anything is written, when the client or the server has enough open.
    release = context.logStreams.acquire(context.clientOf(request));
    const prepared = await stream.prepare(reader.signal);
    reply.hijack();
    hijacked = true;
    // The client may have hung up, or the server begun to shut down, while the stream was being
    // prepared: those events fired before the listeners above, and will not fire again.
    if (context.shutdown.aborted) stop();
    if (out.destroyed) return;
    openEventStream(out, stream.name);
    heartbeat = setInterval(() => out.write(': keep-alive\n\n'), heartbeatMs);
    await stream.write(out, reader.signal, prepared);
  } finally {
    clearInterval(heartbeat);
    context.shutdown.removeEventListener('abort', stop);
    out.off('close', stop);
    release();
    if (hijacked) out.end();
  }
}
