/**
 * `GET /v1/events`: the notifications of every migration of every environment, as Server-Sent
 * Events carrying the same CloudEvents JSON that webhooks get. Counted with the log streams
 * against the same limits.
 */

import type { FastifyInstance } from 'fastify';
import { CutoverError } from '../../core/errors.js';
import type { MigrationService } from '../../engine/services/migration-service.js';
import { serveEventStream } from '../event-stream.js';
import { HttpProblem } from '../problems.js';
import { type RouteContext, routeSchema } from '../route-context.js';

export function registerEventRoutes(app: FastifyInstance, context: RouteContext): void {
  const { service } = context;
  app.get(
    '/v1/events',
    routeSchema('viewer', {
      summary: 'The events of every migration, as they happen',
      description:
        "Server-Sent Events (text/event-stream) across all environments: one event per migration notification (started, step_reached, analysis_failed, rolled_back, cancelled, awaiting_commit, awaiting_promotion, completed, failed), its SSE `event:` the CloudEvents type (`dev.cutover.migration.completed`) and its `data:` the CloudEvents 1.0 JSON that webhook targets get (schema CloudEvent). Each carries `id:` the CloudEvent's id (`<migration>.<journal line>.<index>`); a client that reconnects with `Last-Event-ID` first gets the events after that one; an id that is not an event id, or names a migration the server does not know, gets an event `reset` (`{lastEventId, reason}`) first, saying where the stream goes on from. Needs `Accept: text/event-stream` (406 NOT_ACCEPTABLE otherwise). In Temporal mode the events are polled from the migration workflows (about a second behind; a worker answers the queries). Counted against the log stream limits (429 TOO_MANY_LOG_STREAMS).",
      tags: ['migrations'],
      response: { 200: { description: 'An event stream of CloudEvent', type: 'string' } },
    }),
    async (request, reply) => {
      // An event stream never ends: a client that did not ask for one (a plain GET) is told so
      // rather than left waiting for a body.
      if (!String(request.headers.accept ?? '').includes('text/event-stream')) {
        throw new HttpProblem(
          'NOT_ACCEPTABLE',
          'GET /v1/events is an event stream that does not end: send Accept: text/event-stream (curl -N -H "Accept: text/event-stream" …)',
        );
      }
      const header = request.headers['last-event-id'];
      const after = Array.isArray(header) ? header[0] : header;
      await serveEventStream(request, reply, context, {
        name: 'cutover event stream',
        async prepare(signal) {
          const events = service.events(after === undefined ? { signal } : { signal, after });
          // The first step refuses (NOT_SUPPORTED) before anything is written, as a problem+json.
          const first = events.next();
          return { events, first, early: await Promise.race([first, firstLook()]) };
        },
        async write(out, _signal, { events, first, early }) {
          const reset = after === undefined ? null : await unknownResumePoint(after, service);
          if (reset) out.write(`event: reset\ndata: ${JSON.stringify(reset)}\n\n`);
          try {
            for (let next = early ?? (await first); !next.done; next = await events.next()) {
              const e = next.value;
              out.write(`id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
            }
            if (context.shutdown.aborted) out.write('event: shutdown\ndata: {}\n\n');
          } finally {
            await events.return(undefined);
          }
        },
      });
    },
  );
}

/** Long enough for a refusal (thrown at the first step) to arrive before the stream is opened. */
function firstLook(): Promise<null> {
  return new Promise((resolve) => setTimeout(() => resolve(null), 50));
}

/**
 * What a Last-Event-ID that names no event of this server means, told to the client before the
 * events (it would otherwise take what follows for what came after its own position): null when
 * the id names a migration the server knows.
 */
async function unknownResumePoint(
  after: string,
  service: MigrationService,
): Promise<{ lastEventId: string; reason: string } | null> {
  const match = /^(mig_[a-z0-9]+)\.\d+\.\d+$/.exec(after.trim());
  if (!match) {
    return {
      lastEventId: after,
      reason: `Last-Event-ID ${JSON.stringify(after)} is not an event id of this server (<migration>.<journal line>.<index>): events follow from now on`,
    };
  }
  const migration = match[1] as string;
  try {
    await service.find(migration);
    return null;
  } catch (error) {
    if (!(error instanceof CutoverError) || error.code !== 'MIGRATION_NOT_FOUND') throw error;
    return {
      lastEventId: after,
      reason: `Last-Event-ID ${after} names migration ${migration}, which this server does not know (pruned, or another server's): the events of migrations started after it follow, then events as they happen`,
    };
  }
}
