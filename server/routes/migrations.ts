/**
 * Migration resources: list, show, logs (JSON lines, or Server-Sent Events while following) and the
 * operator verbs.
 */

import type { FastifyInstance } from 'fastify';
import type { Lifecycle, Verb } from '../../core/migration/types.js';
import type { ResolveRequest } from '../../engine/services/migration-service.js';
import { detailJson, listJson, logLineJson, summaryJson } from '../../views/migration-json.js';
import { serveEventStream } from '../event-stream.js';
import { type RouteContext, routeSchema } from '../route-context.js';
import { ref } from '../schemas.js';
import { idempotencyHeader, idempotent } from './operations.js';

/** `POST /v1/migrations/{id}/promote`: `{ "full": true }` skips the remaining steps; no body, the next step. */
const promoteBody = {
  type: ['object', 'null'],
  additionalProperties: false,
  properties: { full: { type: 'boolean', description: 'Straight to 100 %, skipping the remaining steps.' } },
};

const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id: ref('MigrationId') },
};

const verbText: Record<Verb, string> = {
  pause: 'Pause at the next step boundary (a health gate or bake clock stops)',
  resume: 'Resume a paused migration; also picks up a migration whose process died',
  rollback: 'Roll back: traffic back to blue first, then green retired (any time before commit)',
  cancel: 'Abort: the same safe end as rollback, recorded as cancelled',
  commit: 'Commit a migration awaiting it (manual strategy): the point of no return',
  promote:
    'Promote a migration waiting at a shift step with `hold: manual`: on to the next step, or with `{ "full": true }` straight to 100 %',
};

/**
 * Where a reconnecting client goes on from: after the line its Last-Event-ID names; from the start
 * when it sent none. An id that is no line of this log (not a count, or past the log's end: the
 * client's position is of something else) starts from the first line too, and `reset` says why,
 * so that the client drops what it holds instead of taking line 1 for the line after its own.
 */
async function resumePoint(
  header: string | string[] | undefined,
  linesNow: () => Promise<number>,
): Promise<{ after: number; reset: { lastEventId: string; lines: number; reason: string } | null }> {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (value === undefined) return { after: 0, reset: null };
  const lines = await linesNow();
  if (!/^\d{1,15}$/.test(value)) {
    const reason = `Last-Event-ID ${JSON.stringify(value)} is not a line position of this log (ids are 1, 2, 3…): the log follows from its first line`;
    return { after: 0, reset: { lastEventId: value, lines, reason } };
  }
  const after = Number(value);
  if (after > lines) {
    const reason = `Last-Event-ID ${after} is past the end of this log (${lines} lines): the log follows from its first line`;
    return { after: 0, reset: { lastEventId: value, lines, reason } };
  }
  return { after, reset: null };
}

async function countLines(lines: AsyncIterable<unknown>): Promise<number> {
  let count = 0;
  for await (const _ of lines) count += 1;
  return count;
}

interface ListQuery {
  environment?: string;
  state?: Lifecycle;
  limit: number;
  cursor?: string;
}

export function registerMigrationRoutes(app: FastifyInstance, context: RouteContext): void {
  const { service } = context;

  app.get<{ Querystring: ListQuery }>(
    '/v1/migrations',
    routeSchema('viewer', {
      summary: 'List migrations, newest first',
      description:
        'Filter by environment and lifecycle state; page with `limit` and the `nextCursor` of the previous page.',
      tags: ['migrations'],
      querystring: {
        type: 'object',
        additionalProperties: false,
        properties: {
          environment: { type: 'string', minLength: 1, maxLength: 253 },
          state: ref('Lifecycle'),
          limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
          cursor: ref('MigrationId'),
        },
      },
      response: { 200: ref('MigrationList') },
    }),
    async (request) => {
      const q = request.query;
      const filter: { environment?: string; state?: Lifecycle } = {};
      if (q.environment !== undefined) filter.environment = q.environment;
      if (q.state !== undefined) filter.state = q.state;
      const all = await service.list(filter);
      const start = q.cursor === undefined ? 0 : all.findIndex((m) => m.id < (q.cursor as string));
      const from = start < 0 ? all.length : start;
      const items = all.slice(from, from + q.limit);
      const more = from + q.limit < all.length;
      return listJson(items, more ? (items[items.length - 1]?.id ?? null) : null);
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/migrations/:id',
    routeSchema('viewer', {
      summary: 'Show one migration: its summary and whole state',
      tags: ['migrations'],
      params: idParams,
      response: { 200: ref('MigrationDetail') },
    }),
    async (request) => {
      return detailJson(await service.show(await service.find(request.params.id)));
    },
  );

  app.get<{ Params: { id: string }; Querystring: { follow: boolean } }>(
    '/v1/migrations/:id/logs',
    routeSchema('viewer', {
      summary: 'The log of a migration',
      description:
        "JSON lines (application/x-ndjson), one log line each. With `follow=true`, Server-Sent Events (text/event-stream): an event `log` per line as it is written, then one event `end` with `{summary}` when the migration has ended. Every `log` event carries an `id:` (the line's position in the log, from 1); a client that reconnects with a `Last-Event-ID` header gets the lines after that one; an id that is no line of the log (not a count, or past its end) gets an event `reset` (`{lastEventId, lines, reason}`) first, then the log from its first line. Live streams are limited per token (per address without auth) and overall (`--max-log-streams-per-token`, `--max-log-streams`): beyond, 429 TOO_MANY_LOG_STREAMS with Retry-After.",
      tags: ['migrations'],
      params: idParams,
      querystring: {
        type: 'object',
        additionalProperties: false,
        properties: { follow: { type: 'boolean', default: false } },
      },
      response: {
        200: {
          description: 'JSON lines of LogLine, or an event stream',
          type: 'string',
        },
      },
    }),
    async (request, reply) => {
      const id = await service.find(request.params.id);
      if (!request.query.follow) {
        let text = '';
        for await (const line of service.logs(id, { follow: false }))
          text += `${JSON.stringify(logLineJson(line))}\n`;
        return reply
          .type('application/x-ndjson')
          .serializer((x: unknown) => String(x))
          .send(text);
      }
      await serveEventStream(request, reply, context, {
        name: 'cutover log stream',
        prepare: async () => undefined,
        async write(out, signal) {
          // Each log event's id is its line's position in the log (1-based); a client that lost the
          // stream sends the last id it got and goes on from the line after it.
          const resume = await resumePoint(request.headers['last-event-id'], () =>
            countLines(service.logs(id, { follow: false })),
          );
          if (resume.reset) out.write(`event: reset\ndata: ${JSON.stringify(resume.reset)}\n\n`);
          let position = resume.after;
          // Driven by hand (its return value is the summary); returned in any case, so that this
          // stream's share of the migration's reader is always given back.
          const lines = context.logStreams.follow(id, signal, position);
          try {
            for (let next = await lines.next(); ; next = await lines.next()) {
              if (next.done) {
                if (next.value !== null)
                  out.write(`event: end\ndata: ${JSON.stringify({ summary: summaryJson(next.value) })}\n\n`);
                else if (context.shutdown.aborted) out.write('event: shutdown\ndata: {}\n\n');
                break;
              }
              position += 1;
              out.write(`id: ${position}\nevent: log\ndata: ${JSON.stringify(logLineJson(next.value))}\n\n`);
            }
          } finally {
            await lines.return(null);
          }
        },
      });
    },
  );

  app.post<{ Params: { id: string }; Body: ResolveRequest }>(
    '/v1/migrations/:id/resolve',
    routeSchema('operator', {
      summary: 'Resolve undo steps left for a person: run them again, or mark them done',
      description:
        'For a migration that has ended with undo steps that kept failing (`state.ending.skipped`). `how: retry` runs them again (the migration is rolling back until they are done); `how: skip` marks them resolved by the caller. Journaled before the answer. 202 with the migration; 409 VERB_REFUSED when nothing is left to resolve, or MIGRATION_CONFLICT when another migration of the environment is in flight.',
      tags: ['migrations'],
      headers: idempotencyHeader,
      params: idParams,
      body: ref('ResolveRequest'),
      response: { 202: ref('ResolveResponse') },
    }),
    async (request, reply) =>
      idempotent(context, request, reply, async () => {
        const id = await service.find(request.params.id);
        const { summary, state } = await service.resolve(id, request.body, request.principal?.name);
        return {
          status: 202,
          headers: { location: `/v1/migrations/${id}` },
          body: detailJson({ summary, state }),
        };
      }),
  );

  for (const verb of ['pause', 'resume', 'rollback', 'commit', 'cancel', 'promote'] as const) {
    app.post<{ Params: { id: string }; Body: { full?: boolean } | undefined }>(
      `/v1/migrations/:id/${verb}`,
      routeSchema('operator', {
        summary: verbText[verb],
        description:
          'The verb is journaled before the answer; its effects follow. 202 with the migration; 404 when unknown; 409 VERB_REFUSED (with the reason) when the migration cannot do that now.',
        tags: ['migrations'],
        headers: idempotencyHeader,
        params: idParams,
        ...(verb === 'promote' ? { body: promoteBody } : {}),
        response: { 202: ref('VerbResponse') },
      }),
      async (request, reply) =>
        idempotent(context, request, reply, async () => {
          const id = await service.find(request.params.id);
          const full = verb === 'promote' && request.body?.full === true;
          const outcome = await service.verb(id, verb, request.principal?.name, full ? { full: true } : {});
          return {
            status: 202,
            headers: { location: `/v1/migrations/${id}` },
            body: { summary: summaryJson(outcome.summary), recovered: outcome.recovered },
          };
        }),
    );
  }
}
