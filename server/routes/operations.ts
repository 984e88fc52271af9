/**
 * The spec's three operations (`/v1/plan`, `/v1/apply`, `/v1/cancel`) and `/v1/validate`.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { planTopologyText, TopologyInvalidError, validateTopologyText } from '../../engine/api.js';
import { summaryJson } from '../../views/migration-json.js';
import { renderPlanJson } from '../../views/render-plan-json.js';
import type { StoredResponse } from '../idempotency.js';
import { HttpProblem } from '../problems.js';
import { type RouteContext, routeSchema } from '../route-context.js';
import { environmentParams, ref } from '../schemas.js';
import { topologyInput, withTopology } from '../topology-input.js';

interface ValidateBody {
  topology: unknown;
  path?: string;
}
interface PlanBody extends ValidateBody {
  against?: unknown;
  againstPath?: string;
}
interface ApplyBody extends ValidateBody {
  planId?: string;
}

export function registerOperationRoutes(app: FastifyInstance, context: RouteContext): void {
  const { workdir } = context.options;
  registerDownRoute(app, context);

  app.post<{ Body: ValidateBody }>(
    '/v1/validate',
    routeSchema('viewer', {
      summary: 'Validate a topology',
      description: 'Every problem comes back at once in a 422 problem, located by line and column for text.',
      tags: ['topologies'],
      body: ref('ValidateRequest'),
      response: { 200: ref('ValidateResponse') },
    }),
    async (request) => {
      const input = topologyInput(request.body.topology, request.body.path, workdir, 'topology');
      return withTopology(input, async () => {
        const result = validateTopologyText(input.source);
        if (!result.ok) throw new TopologyInvalidError(result.diagnostics);
        const t = result.topology;
        return {
          valid: true,
          environment: t.metadata.name,
          components: Object.keys(t.components).length,
          routes: Object.keys(t.routes).length,
        };
      });
    },
  );

  app.post<{ Body: PlanBody }>(
    '/v1/plan',
    routeSchema('viewer', {
      summary: 'Plan a topology: the ordered actions a migration to it would take, and why',
      description:
        "The plan JSON exactly as `cutover topology plan --format json` prints it. Against the layout recorded in the server's state directory, or against another topology given as `against`.",
      tags: ['topologies'],
      body: ref('PlanRequest'),
      response: { 200: ref('Plan') },
    }),
    async (request, reply) => {
      const body = request.body;
      const input = topologyInput(body.topology, body.path, workdir, 'topology');
      const plan = await withTopology(input, async () => {
        // Through the service: it knows the state directory whose key hashes secrets for the plan.
        if (body.against === undefined) return context.service.plan(input.source, { kind: 'recorded' });
        if (body.against === null) return planTopologyText(input.source, { kind: 'empty' });
        const base = topologyInput(body.against, body.againstPath ?? 'against.yaml', workdir, 'against');
        return withTopology(base, () =>
          planTopologyText(input.source, { kind: 'text', source: base.source }),
        );
      });
      return reply.type('application/json; charset=utf-8').send(renderPlanJson(plan));
    },
  );

  app.post<{ Body: ApplyBody }>(
    '/v1/apply',
    routeSchema('operator', {
      summary: 'Start a migration to a topology',
      description:
        'Plans against the recorded layout and starts the migration in a background process: 202 with the migration and its Location. 200 with `summary: null` when there is nothing to change. 409 MIGRATION_CONFLICT when a migration is in flight for the environment (naming it), PLAN_STALE or PLAN_MISMATCH when `planId` is not what the topology plans to now. Send an `Idempotency-Key` header to make retries safe.',
      tags: ['migrations'],
      headers: idempotencyHeader,
      body: ref('ApplyRequest'),
      response: {
        200: { ...ref('ApplyResponse'), description: 'Nothing to change: no migration started' },
        202: { ...ref('ApplyResponse'), description: 'The migration started' },
      },
    }),
    async (request, reply) =>
      idempotent(context, request, reply, async (): Promise<StoredResponse> => {
        const body = request.body;
        const input = topologyInput(body.topology, body.path, workdir, 'topology');
        const started = await withTopology(input, () =>
          context.service.start({
            file: input.source.file,
            text: input.source.text,
            baseDir: input.baseDir,
            ...(body.planId === undefined ? {} : { planId: body.planId }),
          }),
        );
        if (!started.created) {
          return { status: 200, headers: {}, body: { summary: null, planId: started.planId } };
        }
        const { id, environment } = started.summary;
        request.log.info({ migration: id, environment, by: request.principal?.name }, 'migration started');
        return {
          status: 202,
          headers: { location: `/v1/migrations/${id}` },
          body: { summary: summaryJson(started.summary), planId: started.planId },
        };
      }),
  );

  app.post<{ Body: { migrationId: string } }>(
    '/v1/cancel',
    routeSchema('operator', {
      summary: 'Abort an in-flight migration',
      description:
        'Traffic goes back to blue first, then green is removed; the migration ends `cancelled`. 202 with the migration; 404 when unknown; 409 VERB_REFUSED when it can no longer be cancelled (committing, or ended).',
      tags: ['migrations'],
      headers: idempotencyHeader,
      body: ref('CancelRequest'),
      response: { 202: ref('VerbResponse') },
    }),
    async (request, reply) =>
      idempotent(context, request, reply, async () => {
        const id = await context.service.find(request.body.migrationId);
        const outcome = await context.service.verb(id, 'cancel', request.principal?.name);
        return {
          status: 202,
          headers: { location: `/v1/migrations/${id}` },
          body: { summary: summaryJson(outcome.summary), recovered: outcome.recovered },
        };
      }),
  );
}

function registerDownRoute(app: FastifyInstance, context: RouteContext): void {
  app.post<{ Params: { environment: string } }>(
    '/v1/environments/:environment/down',
    routeSchema('operator', {
      summary: 'Take an environment down: stop every route and process of its layout, record it empty',
      description:
        'As `cutover topology down --yes`. 404 ENVIRONMENT_NOT_FOUND for an environment with no recorded layout (never migrated); 409 MIGRATION_CONFLICT while a migration is in flight (cancel it first). Idempotent: an environment taken down before answers with empty lists.',
      tags: ['environments'],
      params: environmentParams,
      response: { 200: ref('DownResponse') },
    }),
    async (request) => {
      const { environment } = request.params;
      const result = await context.service.down(environment, {
        fallbackBaseDir: context.options.workdir,
        log: (line) => request.log.info({ environment }, line),
      });
      return { environment, components: result.components, routes: result.routes };
    },
  );
}

export const idempotencyHeader = {
  type: 'object',
  properties: {
    'idempotency-key': {
      type: 'string',
      description: 'Makes a retry safe: the first request with a key runs; a retry gets its response again.',
    },
  },
};

/** Runs an operation under the request's Idempotency-Key, if it has one, and sends its response. */
export async function idempotent(
  context: RouteContext,
  request: FastifyRequest,
  reply: FastifyReply,
  execute: () => Promise<StoredResponse>,
): Promise<FastifyReply> {
  const key = request.headers['idempotency-key'];
  let response: StoredResponse;
  if (typeof key === 'string') {
    const fingerprint = createHash('sha256')
      .update(`${request.method} ${request.url.split('?')[0]}\u0000${serializeBody(request.body)}`)
      .digest('hex');
    const scope = request.principal?.name ?? 'anonymous';
    const outcome = await context.idempotency.run(scope, key, fingerprint, execute);
    response = outcome.response;
    if (outcome.replayed) void reply.header('idempotent-replayed', 'true');
  } else {
    response = await execute();
  }
  return reply.code(response.status).headers(response.headers).send(response.body);
}

/**
 * The body as JSON, for a fingerprint. It is fingerprinted before any route looks at it: a body
 * nested too deep for JSON.stringify (tens of thousands of levels) is the client's error, not a 500.
 */
function serializeBody(body: unknown): string {
  try {
    return JSON.stringify(body ?? null);
  } catch (error) {
    if (error instanceof RangeError) {
      throw new HttpProblem('BAD_REQUEST', 'the request body is nested too deeply');
    }
    throw error;
  }
}
