/**
 * `POST /v1/environments/{name}/rollback`: `cutover topology rollback` through a server. The
 * recorded layouts and the directories their paths resolve in are the server's, so the server
 * finds the layout, plans it and starts the migration; a dry run only plans.
 */
import type { FastifyInstance } from 'fastify';
import { parseRollbackTarget } from '../../engine/api.js';
import { summaryJson } from '../../views/migration-json.js';
import type { StoredResponse } from '../idempotency.js';
import { type RouteContext, routeSchema } from '../route-context.js';
import { environmentParams, ref } from '../schemas.js';
import { idempotencyHeader, idempotent } from './operations.js';

interface RollbackBody {
  to: string;
  planId?: string;
  dryRun?: boolean;
}

export function registerRollbackRoute(app: FastifyInstance, context: RouteContext): void {
  app.post<{ Params: { environment: string }; Body: RollbackBody }>(
    '/v1/environments/:environment/rollback',
    routeSchema('operator', {
      summary: 'Go back to an earlier recorded layout, as a new green-blue migration',
      description:
        'As `cutover topology rollback --to`. Plans the recorded layout `to` names against the current one and starts an ordinary migration to it: 202 with the migration (the layout it commits is a new serial). With `dryRun`, 200 with the plan and the layouts, nothing started. 404 LAYOUT_NOT_FOUND when no kept layout answers `to` (the message says why and what to do), 409 MIGRATION_CONFLICT while a migration is in flight, PLAN_STALE or PLAN_MISMATCH when `planId` is no longer the plan. Send an `Idempotency-Key` header to make retries safe.',
      tags: ['environments'],
      headers: idempotencyHeader,
      params: environmentParams,
      body: ref('RollbackRequest'),
      response: {
        200: { description: 'A dry run (the plan), or nothing to change: no migration started' },
        202: { ...ref('ApplyResponse'), description: 'The migration back started' },
      },
    }),
    async (request, reply) => {
      const { environment } = request.params;
      const { to, planId, dryRun } = request.body;
      const rollback = { to: parseRollbackTarget(to), fallbackBaseDir: context.options.workdir };
      if (dryRun === true) return reply.send(await context.service.planRollback(environment, rollback));
      return idempotent(context, request, reply, async (): Promise<StoredResponse> => {
        const started = await context.service.startRollback(environment, {
          ...rollback,
          ...(planId === undefined ? {} : { planId }),
          ...(request.principal ? { startedBy: request.principal.name } : {}),
        });
        if (!started.created) {
          return { status: 200, headers: {}, body: { summary: null, planId: started.planId } };
        }
        const { id } = started.summary;
        request.log.info({ migration: id, environment, to, by: request.principal?.name }, 'rollback started');
        return {
          status: 202,
          headers: { location: `/v1/migrations/${id}` },
          body: { summary: summaryJson(started.summary), planId: started.planId },
        };
      });
    },
  );
}
