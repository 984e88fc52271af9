/**
 * What the server's routes share: the options it runs with, the context each route gets, and the
 * route options (access, OpenAPI). Kept apart from app.ts, which registers the routes, so routes
 * never import the app that imports them.
 */
import type { FastifyRequest } from 'fastify';
import type { MigrationService } from '../engine/services/migration-service.js';
import type { StateDir } from '../engine/store/state-dir.js';
import type { Principal, Role, TokenStore } from './auth.js';
import type { IdempotencyStore } from './idempotency.js';
import type { LogStreamLimits, LogStreams } from './log-streams.js';
import type { HttpProblem } from './problems.js';
import { ref } from './schemas.js';

/** Who may call a route: anybody, or a token of at least this role. */
export type Access = 'public' | Role;

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: Access;
  }
  interface FastifyRequest {
    principal: Principal | null;
    /** Why the route refuses this request's credentials, answered once it has been rate limited. */
    authRefusal: HttpProblem | null;
  }
}

export interface ServerOptions {
  /** Where migrations and layouts are kept (as `--state-dir` for the CLI). */
  stateDir: StateDir;
  /** Relative topology paths in requests resolve against this. */
  workdir: string;
  /** null: auth off (the server then binds to loopback only). */
  tokens: TokenStore | null;
  /** Largest request body, in bytes (default 1 MiB). */
  bodyLimit?: number;
  /** Requests per token (or client address) per minute; 0 turns the limit off (default 600). */
  rateLimitPerMinute?: number;
  /** Live log streams (`?follow=true`) open at once, per client and overall (default 20 and 200). */
  logStreams?: LogStreamLimits;
  /** Time allowed to receive a whole request (default 30 s). */
  requestTimeoutMs?: number;
  /** Where migrations run: default, the local state directory. */
  service?: MigrationService;
  /** The shared secret that signs Git webhooks (POST /v1/hooks/git); none: the hook answers 503. */
  hookSecret?: string;
  /** pino level: fatal, error, warn, info (default), debug, trace or silent. */
  logLevel?: string;
  /** Where the request log goes (default stdout): an embedder's own sink. */
  logDestination?: { write(line: string): void };
  version: string;
}

export interface RouteContext {
  options: ServerOptions;
  idempotency: IdempotencyStore;
  /** Aborted when the server shuts down: long-lived responses (log streams) end. */
  shutdown: AbortSignal;
  /** Migrations, locally or on Temporal (WORKFLOW_HOST). */
  service: MigrationService;
  /** Live log streams: their slots, and one shared reader per migration followed. */
  logStreams: LogStreams;
  /** Who a request counts as, for limits: its valid token, else its address. */
  clientOf(request: FastifyRequest): { key: string; label: string };
}

/** Errors are documented with the media type they are sent with. */
const problemResponse = {
  description: 'A problem (RFC 9457)',
  content: { 'application/problem+json': { schema: ref('Problem') } },
};

/** Route options shared by every route: who may call it, and what the OpenAPI document says. */
export function routeSchema(
  access: Access,
  schema: Record<string, unknown>,
): { config: { access: Access }; schema: Record<string, unknown> } {
  const security = access === 'public' ? [] : [{ bearer: [] }];
  const response = {
    ...(schema.response as Record<string, unknown> | undefined),
    '4xx': problemResponse,
    '5xx': problemResponse,
  };
  const description = `${String(schema.description ?? '')}\n\nAccess: ${access === 'public' ? 'anybody' : `a ${access} token${access === 'viewer' ? ' or an operator token' : ''}`}.`;
  return { config: { access }, schema: { ...schema, description, security, response } };
}
