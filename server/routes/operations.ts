/**
 * The spec's three operations (`/v1/plan`, `/v1/apply`, `/v1/cancel`) and `/v1/validate`.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseSavedPlan, savedPlanOf } from '../../core/plan/saved-plan.js';
import {
  appliedCommitOf,
  planTopologyText,
  TopologyInvalidError,
  validateTopologyText,
} from '../../engine/api.js';
import { summaryJson } from '../../views/migration-json.js';
import { renderPlanJson } from '../../views/render-plan-json.js';
import type { StoredResponse } from '../idempotency.js';
import { HttpProblem } from '../problems.js';
import { type RouteContext, routeSchema } from '../route-context.js';
import { environmentParams, ref } from '../schemas.js';
import { type TopologyInput, topologyInput, withTopology } from '../topology-input.js';

interface ValidateBody {
  topology: unknown;
  path?: string;
}
interface PlanBody extends ValidateBody {
  against?: unknown;
  againstPath?: string;
  saved?: boolean;
  commit?: string | null;
}
interface ApplyBody {
  topology?: unknown;
  path?: string;
  planId?: string;
  plan?: unknown;
  baseSerial?: number;
  commit?: string | null;
  /** `--parallelism`: the schema bounds it to 1..1000. */
  parallelism?: number;
  /** `--allow-absent-hosts`. */
  allowAbsentHosts?: boolean;
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
        "The plan JSON exactly as `cutover topology plan --format json` prints it. Against the layout recorded in the server's state directory, or against another topology given as `against`. With `saved: true`, a saved plan (SavedPlan) that POST /v1/apply (and `cutover topology apply`) applies exactly.",
      tags: ['topologies'],
      body: ref('PlanRequest'),
      response: { 200: { anyOf: [ref('Plan'), ref('SavedPlan')] } },
    }),
    async (request, reply) => {
      const body = request.body;
      const input = topologyInput(body.topology, body.path, workdir, 'topology');
      if (body.saved === true) {
        if (body.against !== undefined) {
          throw new HttpProblem(
            'BAD_REQUEST',
            'saved: a saved plan is planned against the live layout, not `against`',
          );
        }
        const live = await withTopology(input, () => context.service.planLive(input.source));
        const saved = savedPlanOf({
          plan: live.plan,
          plannedAgainst: live.against,
          topology: input.source,
          commit: body.commit ?? null,
          createdAt: new Date().toISOString(),
        });
        return reply.type('application/json; charset=utf-8').send(`${JSON.stringify(saved, null, 2)}\n`);
      }
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
        "Plans against the recorded layout and starts the migration in a background process: 202 with the migration and its Location. 200 with `summary: null` when there is nothing to change. 409 MIGRATION_CONFLICT when a migration is in flight for the environment (naming it), PLAN_STALE or PLAN_MISMATCH when `planId` is not what the topology plans to now. With `plan` (a saved plan) instead of `topology`, applies exactly it: 409 PLAN_STALE when the live layout moved since it was planned, 409 PLAN_MISMATCH when re-planning gives another plan, 422 PLAN_INVALID when it is not a saved plan. The migration records who started it (the token's name) and the commit. Send an `Idempotency-Key` header to make retries safe.",
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
        const started = await startApply(context, request.body, request.principal?.name);
        if (!started.created) {
          return { status: 200, headers: {}, body: { summary: null, planId: started.planId } };
        }
        const { id, environment } = started.summary;
        request.log.info({ migration: id, environment, by: request.principal?.name }, 'migration started');
        if (started.notice) request.log.warn({ migration: id, environment }, started.notice);
        return {
          status: 202,
          headers: { location: `/v1/migrations/${id}` },
          body: {
            summary: summaryJson(started.summary),
            planId: started.planId,
            ...(started.notice ? { notice: started.notice } : {}),
          },
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

/**
 * POST /v1/apply: a topology (pinned to a reviewed planId, optionally), or a saved plan, applied
 * exactly: its topology, its plan id and the serial it was planned against. Who starts it is the
 * token's name, never the client's say.
 */
async function startApply(context: RouteContext, body: ApplyBody, principal: string | undefined) {
  const { workdir } = context.options;
  const startedBy = principal === undefined ? {} : { startedBy: principal };
  const startOptions = {
    ...(body.parallelism === undefined ? {} : { parallelism: body.parallelism }),
    ...(body.allowAbsentHosts === true ? { allowAbsentHosts: true } : {}),
  };
  if (body.plan !== undefined) {
    if (body.topology !== undefined || body.planId !== undefined || body.baseSerial !== undefined) {
      throw new HttpProblem(
        'BAD_REQUEST',
        '`plan` (a saved plan) carries its own topology, planId and baseSerial: send it alone',
      );
    }
    const saved = parseSavedPlan(
      JSON.stringify(body.plan),
      'plan',
      'send what POST /v1/plan with `saved: true` (or `cutover topology plan --out`) answers',
    );
    const input = topologyInput(saved.topology.text, saved.topology.file, workdir, 'plan.topology', true);
    const appliedCommit = await appliedCommitOf(inWorkdir(input), input.source.text);
    return withTopology(input, () =>
      context.service.start({
        ...input.source,
        planId: saved.plan.planId,
        baseSerial: saved.baseSerial,
        commit: saved.commit,
        commitFrom: 'saved_plan',
        appliedCommit,
        ...startOptions,
        ...startedBy,
      }),
    );
  }
  const input = topologyInput(body.topology, body.path, workdir, 'topology', true);
  const appliedCommit = await appliedCommitOf(inWorkdir(input), input.source.text);
  return withTopology(input, () =>
    context.service.start({
      ...input.source,
      ...(body.planId === undefined ? {} : { planId: body.planId }),
      ...(body.baseSerial === undefined ? {} : { baseSerial: body.baseSerial }),
      ...(body.commit === undefined ? {} : { commit: body.commit, commitFrom: 'request' as const }),
      appliedCommit,
      ...startOptions,
      ...startedBy,
    }),
  );
}

/** The topology's file in the server's --workdir (topologyInput confined it there). */
function inWorkdir(input: TopologyInput): string {
  return path.join(input.source.baseDir, path.basename(input.source.file));
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
