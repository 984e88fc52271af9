/**
 * `cutover server`: the HTTP front end. It parses requests, checks who is asking, calls the engine
 * API (the same calls as the CLI) and renders results; no engine logic lives here. Migrations it
 * starts run in detached runner processes, so they outlive the server and any restart of it.
 */
import { accessSync, constants, mkdirSync } from 'node:fs';
import swagger from '@fastify/swagger';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { CutoverError } from '../core/errors.js';
import { processRedactor, processSecrets } from '../engine/api.js';
import { localService } from '../engine/services/migration-service.js';
import { identify, registerRateLimit } from './access.js';
import { clientOf } from './auth.js';
import { readDashboard, registerDashboardRoutes } from './dashboard.js';
import { IdempotencyStore } from './idempotency.js';
import { defaultLogStreamLimits, LogStreams } from './log-streams.js';
import { createMetrics, type ServerMetrics } from './metrics.js';
import { clientErrorResponse, HttpProblem, toProblem } from './problems.js';
import { type RouteContext, routeSchema, type ServerOptions } from './route-context.js';
import { registerEnvironmentRoutes } from './routes/environments.js';
import { registerEventRoutes } from './routes/events.js';
import { registerHookRoutes } from './routes/hooks.js';
import { registerMigrationRoutes } from './routes/migrations.js';
import { registerOperationRoutes } from './routes/operations.js';
import { registerRollbackRoute } from './routes/rollback.js';
import { namedSchemas, ref, validatorCompilers } from './schemas.js';

export interface CutoverServer {
  app: FastifyInstance;
  metrics: ServerMetrics;
  /** Stops taking requests, ends log streams, waits for requests in flight. Migrations go on. */
  close(): Promise<void>;
}

export const defaultBodyLimit = 1024 * 1024;

/**
 * A body announced over the limit is refused before it is parsed. Answering at once and closing
 * (Fastify's way) cuts off a client still sending it: most see a reset (EPIPE), not the 413. So a
 * body up to this many times the limit is read and dropped first, and the client gets its answer
 * on a connection that stays open; a larger one is answered at once and the connection closed.
 */
const drainFactor = 8;

async function refuseOversizedBody(
  request: FastifyRequest,
  reply: FastifyReply,
  limit: number,
): Promise<void> {
  const length = Number(request.headers['content-length']);
  if (!(length > limit)) return;
  if (length <= limit * drainFactor) {
    for await (const _ of request.raw) {
      // dropped
    }
  } else {
    void reply.header('connection', 'close');
  }
  // No route: the answer is 404 whatever the body.
  if (request.routeOptions.url === undefined) return;
  throw new HttpProblem('BODY_TOO_LARGE', `the request body is ${length} bytes; the limit is ${limit}`);
}

export async function buildServer(options: ServerOptions): Promise<CutoverServer> {
  mkdirSync(options.stateDir.root, { recursive: true });
  const app = createFastify(options);
  // Without a service handed in: the local one, with the secrets of this process (the server's edge).
  const service = options.service ?? localService(options.stateDir, processSecrets(process.env));
  const logStreams = new LogStreams(service, options.logStreams ?? defaultLogStreamLimits);
  const metrics = createMetrics(service, logStreams);
  const shutdown = new AbortController();
  const context: RouteContext = {
    options,
    idempotency: new IdempotencyStore(options.stateDir.idempotencyDir()),
    shutdown: shutdown.signal,
    service,
    logStreams,
    clientOf: (request) => clientOf(options.tokens === null ? null : request.principal, request.ip),
  };

  app.decorateRequest('principal', null);
  app.decorateRequest('authRefusal', null);
  app.setValidatorCompiler(validatorCompilers());
  // Responses are written with JSON.stringify: response schemas document, they never drop fields.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  for (const schema of namedSchemas()) app.addSchema(schema);
  answerErrorsAsProblems(app);
  await installRequestHooks(app, context, metrics, shutdown);
  await registerOpenApi(app, options.version);

  registerOperationalRoutes(app, context, metrics);
  registerOperationRoutes(app, context);
  registerRollbackRoute(app, context);
  registerMigrationRoutes(app, context);
  registerEnvironmentRoutes(app, context);
  registerHookRoutes(app, context);
  registerEventRoutes(app, context);
  registerDashboardRoutes(app, readDashboard());

  await app.ready();
  return {
    app,
    metrics,
    async close() {
      await app.close();
      await context.service.close();
    },
  };
}

/** Fastify as the server runs it: its limits, client errors and framework errors as problems, logs without secrets. */
function createFastify(options: ServerOptions): FastifyInstance {
  const app = Fastify({
    bodyLimit: options.bodyLimit ?? defaultBodyLimit,
    requestTimeout: options.requestTimeoutMs ?? 30_000,
    exposeHeadRoutes: false,
    // Closing is answered by the onRequest hook (installRequestHooks), as a problem.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    clientErrorHandler(error, socket) {
      if ((error as NodeJS.ErrnoException).code === 'ECONNRESET' || socket.destroyed) return;
      if (socket.writable) socket.write(clientErrorResponse(error as NodeJS.ErrnoException));
      socket.destroy(error);
    },
    logger: {
      level: options.logLevel ?? 'info',
      ...(options.logDestination ? { stream: options.logDestination } : {}),
      // Request logs carry method, path and address; never headers, so no token reaches a log.
      redact: ['req.headers.authorization'],
      serializers: {
        // Nor the query string: a client may put a token there (`?access_token=`), and the
        // server cannot tell which parameter holds a secret.
        req: (request: FastifyRequest) => ({
          method: request.method,
          url: logUrl(request.url),
          host: request.host,
          remoteAddress: request.ip,
          remotePort: request.socket?.remotePort,
        }),
      },
    },
    ajv: { customOptions: { strict: false } },
    // Errors Fastify's router raises before any hook (a URL that does not decode, a path parameter
    // over maxParamLength) are problems too, not Fastify's own JSON.
    frameworkErrors: (error, request, reply) => {
      const { problem } = toProblem(error, request.url.split('?')[0] ?? request.url);
      void (reply as FastifyReply).code(problem.status).type('application/problem+json').send(problem);
    },
  });
  // The API takes JSON only: any other body (text/plain included, which Fastify parses by default)
  // is a 415.
  app.removeContentTypeParser('text/plain');
  return app;
}

/** Every error, and every unknown route, is answered as RFC 9457 problem+json. */
function answerErrorsAsProblems(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    const path = request.url.split('?')[0] ?? request.url;
    // No route: a 404, whatever else is wrong with the request (Fastify parses the body of an
    // unknown route too, and a body that does not parse would otherwise answer 400 or 415).
    const unknownRoute = request.is404 && !(error instanceof HttpProblem);
    const { problem, bug } = toProblem(unknownRoute ? notFound(request.method, path) : error, path);
    if (bug) request.log.error({ err: error }, 'request failed');
    if (error instanceof HttpProblem && error.extra.headers) reply.headers(error.extra.headers);
    void reply.code(problem.status).type('application/problem+json').send(problem);
  });
  app.setNotFoundHandler((request, reply) => {
    throw notFound(request.method, request.url.split('?')[0] ?? request.url);
    // biome-ignore lint/correctness/noUnreachable: the handler's type wants a reply
    return reply;
  });
}

/**
 * In order: a closing server refuses; the caller is identified; the rate limit counts it (by a
 * valid token, else by address); only then is a refused token told so, and an oversized body
 * refused. Responses are counted in the metrics; closing aborts log streams.
 */
async function installRequestHooks(
  app: FastifyInstance,
  context: RouteContext,
  metrics: ServerMetrics,
  shutdown: AbortController,
): Promise<void> {
  const { options } = context;
  app.addHook('onRequest', async (request, reply) => {
    if (shutdown.signal.aborted && request.routeOptions.url !== '/readyz') {
      void reply.header('connection', 'close');
      throw new HttpProblem(
        'SHUTTING_DOWN',
        'the server is shutting down; retry on another instance or shortly',
      );
    }
    const identity = identify(request, options.tokens);
    request.principal = identity.principal;
    request.authRefusal = identity.refusal;
  });
  await registerRateLimit(app, context);
  // After the rate limit: a refused token has spent its address's budget before it is told so.
  app.addHook('onRequest', async (request, reply) => {
    if (request.authRefusal !== null) throw request.authRefusal;
    await refuseOversizedBody(request, reply, options.bodyLimit ?? defaultBodyLimit);
  });
  // Every answer, to every role, masked as the engine's writers mask (core/redact.ts): the secrets
  // this server can read and credential shapes, such as a hook URL's `user:password@` in a layout.
  const redact = processRedactor();
  app.addHook('onSend', async (_request, _reply, payload) =>
    typeof payload === 'string' ? redact.text(payload) : payload,
  );
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.observeRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
  });
  app.addHook('preClose', async () => {
    shutdown.abort();
  });
}

/** The OpenAPI 3.1 document, generated from the route schemas. */
async function registerOpenApi(app: FastifyInstance, version: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'cutover',
        version,
        description:
          'Plans and green-blue migrations of topologies over HTTP. Errors are RFC 9457 problem details with a stable `code`.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
    },
  });
}

/** A request URL for the log: the path, with the query string's presence but not its content. */
export function logUrl(url: string): string {
  const at = url.indexOf('?');
  return at < 0 ? url : `${url.slice(0, at)}?…`;
}

function notFound(method: string, path: string): HttpProblem {
  return new HttpProblem('NOT_FOUND', `no route ${method} ${path}; see GET /v1/openapi.json`);
}

function registerOperationalRoutes(
  app: FastifyInstance,
  context: RouteContext,
  metrics: ServerMetrics,
): void {
  app.get(
    '/healthz',
    routeSchema('public', {
      summary: 'Liveness: the process answers',
      tags: ['operations'],
      response: { 200: ref('Health') },
    }),
    async () => ({ status: 'ok' }),
  );
  app.get(
    '/readyz',
    routeSchema('public', {
      summary: 'Readiness: the state directory is writable and the server is not shutting down',
      tags: ['operations'],
      response: { 200: ref('Health'), 503: ref('Health') },
    }),
    async (_request, reply) => {
      if (context.shutdown.aborted)
        return reply.code(503).send({ status: 'not_ready', detail: 'shutting down' });
      try {
        accessSync(context.options.stateDir.root, constants.W_OK);
      } catch (error) {
        return reply.code(503).send({
          status: 'not_ready',
          detail: `state directory not writable: ${(error as Error).message}`,
        });
      }
      return { status: 'ready' };
    },
  );
  app.get(
    '/metrics',
    routeSchema('viewer', {
      summary:
        'Prometheus metrics: migrations by state, stage durations, health-gate failures, HTTP requests',
      tags: ['operations'],
      response: { 200: { type: 'string', description: 'Prometheus text exposition format' } },
    }),
    async (_request: FastifyRequest, reply: FastifyReply) => {
      const text = await metrics.registry.metrics();
      return reply
        .type(metrics.registry.contentType)
        .serializer((x: unknown) => String(x))
        .send(text);
    },
  );
  app.get(
    '/v1/whoami',
    routeSchema('viewer', {
      summary: "Who this request's token is: its name and role (what a client may offer its user)",
      description:
        'With auth off (no tokens), `{ name: "anonymous", role: "operator", auth: false }`. The dashboard asks it at sign-in: a wrong token is a 401, a viewer sees no action buttons.',
      tags: ['operations'],
      response: { 200: ref('Whoami') },
    }),
    async (request) => ({
      name: request.principal?.name ?? 'anonymous',
      role: request.principal?.role ?? 'operator',
      auth: context.options.tokens !== null,
    }),
  );
  app.get(
    '/v1/openapi.json',
    routeSchema('public', {
      summary: 'This API as an OpenAPI 3.1 document',
      tags: ['operations'],
      response: { 200: { type: 'object' } },
    }),
    async () => app.swagger(),
  );
}

/** A CutoverError for a state the server cannot act on; used by the route modules. */
export function usage(message: string): CutoverError {
  return new CutoverError('USAGE', message);
}
