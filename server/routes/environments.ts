/**
 * Environment resources: what runs in each environment beside its record, the migration in flight
 * and the drift (`cutover topology status` over HTTP). Reads only; taking an environment down is
 * in operations.ts.
 */
import type { FastifyInstance } from 'fastify';
import { type RouteContext, routeSchema } from '../route-context.js';
import { environmentParams, ref } from '../schemas.js';

export function registerEnvironmentRoutes(app: FastifyInstance, context: RouteContext): void {
  const { service } = context;

  app.get(
    '/v1/environments',
    routeSchema('viewer', {
      summary: 'List environments: serial, counts, the migration in flight, how much drift',
      description:
        'Every environment with a recorded layout (or a migration in flight), by name. Each is observed to count its drift, so the answer takes as long as the slowest driver look.',
      tags: ['environments'],
      response: { 200: ref('EnvironmentList') },
    }),
    async () => ({ items: await service.environments() }),
  );

  app.get<{ Params: { environment: string } }>(
    '/v1/environments/:environment',
    routeSchema('viewer', {
      summary: 'One environment as recorded and as observed: components, replicas, routes, drift',
      description:
        'The same object as `cutover topology status --json`. 404 ENVIRONMENT_NOT_FOUND for an environment never migrated.',
      tags: ['environments'],
      params: environmentParams,
      response: { 200: ref('EnvironmentStatus') },
    }),
    async (request) => service.status(request.params.environment),
  );
}
