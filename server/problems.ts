/**
 * Errors as RFC 9457 problem details. Every error has a stable `code`: the engine's codes
 * (core/errors.ts), each given its HTTP status and title here, plus the HTTP layer's own below;
 * `type` is `urn:cutover:problem:<code>`.
 */
import { STATUS_CODES } from 'node:http';
import { CutoverError, type ErrorCode } from '../core/errors.js';
import type { Diagnostic } from '../core/topology/diagnostic.js';
import { TopologyInvalidError } from '../engine/api.js';

interface StatusAndTitle {
  httpStatus: number;
  title: string;
}

/**
 * The engine's codes as HTTP answers. Exhaustive on purpose: a new engine code does not compile
 * until it has a status and a title here.
 */
export const engineProblems: Record<ErrorCode, StatusAndTitle> = {
  TOPOLOGY_INVALID: { httpStatus: 422, title: 'Topology is invalid' },
  TOPOLOGY_NOT_FOUND: { httpStatus: 404, title: 'Topology file not found' },
  TOPOLOGY_TOO_LARGE: { httpStatus: 413, title: 'Topology file too large' },
  ENVIRONMENT_MISMATCH: { httpStatus: 422, title: 'Environments differ' },
  GIT_REF_UNREADABLE: { httpStatus: 422, title: 'Cannot read the topology at a Git revision' },
  STATE_CORRUPT: { httpStatus: 500, title: 'State directory is corrupt' },
  MIGRATION_NOT_FOUND: { httpStatus: 404, title: 'Migration not found' },
  ENVIRONMENT_NOT_FOUND: { httpStatus: 404, title: 'Environment not found' },
  MIGRATION_AMBIGUOUS: { httpStatus: 400, title: 'Migration id prefix is ambiguous' },
  LAYOUT_NOT_FOUND: { httpStatus: 404, title: 'No such recorded layout' },
  MIGRATION_CONFLICT: { httpStatus: 409, title: 'A migration is in flight for this environment' },
  PLAN_MISMATCH: { httpStatus: 409, title: 'The plan differs from the one reviewed' },
  PLAN_STALE: { httpStatus: 409, title: 'The plan is stale' },
  PLAN_INVALID: { httpStatus: 422, title: 'Not a saved plan' },
  VERB_REFUSED: { httpStatus: 409, title: 'The migration cannot do that now' },
  RUNNER_UNREACHABLE: { httpStatus: 503, title: 'The process driving the migration does not answer' },
  CANCELLED: { httpStatus: 409, title: 'Cancelled' },
  DRIVER_FAILED: { httpStatus: 502, title: 'A driver failed' },
  TEMPORAL_UNREACHABLE: { httpStatus: 503, title: 'Temporal (WORKFLOW_HOST) cannot be reached' },
  NOT_SUPPORTED: { httpStatus: 501, title: 'Not available in this mode' },
  SERVER_REFUSED: { httpStatus: 502, title: 'The cutover server refused the request' },
  SERVER_UNREACHABLE: { httpStatus: 502, title: 'The cutover server cannot be reached' },
  USAGE: { httpStatus: 400, title: 'Bad usage' },
  ENVIRONMENT_FAULT: {
    httpStatus: 503,
    title: 'The environment refused (disk, permissions, a port, a missing program)',
  },
  INTERNAL: { httpStatus: 500, title: 'Internal error (a bug in cutover)' },
};

/** Codes of the HTTP layer itself, beside the engine's. */
export const httpErrorCodes = {
  BAD_REQUEST: { httpStatus: 400, title: 'The request is malformed' },
  UNAUTHORIZED: { httpStatus: 401, title: 'Authentication is required' },
  FORBIDDEN: { httpStatus: 403, title: 'The token does not allow this' },
  NOT_FOUND: { httpStatus: 404, title: 'No such resource' },
  METHOD_NOT_ALLOWED: { httpStatus: 405, title: 'Method not allowed' },
  NOT_ACCEPTABLE: { httpStatus: 406, title: 'Not acceptable' },
  IDEMPOTENCY_KEY_IN_USE: {
    httpStatus: 409,
    title: 'A request with this Idempotency-Key is still being processed',
  },
  HOOK_TOO_OLD: { httpStatus: 409, title: 'This webhook delivery is too old' },
  BODY_TOO_LARGE: { httpStatus: 413, title: 'The request body is too large' },
  URI_TOO_LONG: { httpStatus: 414, title: 'The request URL is too long' },
  UNSUPPORTED_MEDIA_TYPE: { httpStatus: 415, title: 'Unsupported media type' },
  IDEMPOTENCY_KEY_REUSED: {
    httpStatus: 422,
    title: 'The Idempotency-Key was used for a different request',
  },
  RATE_LIMITED: { httpStatus: 429, title: 'Too many requests' },
  TOO_MANY_LOG_STREAMS: { httpStatus: 429, title: 'Too many log streams are open' },
  SHUTTING_DOWN: { httpStatus: 503, title: 'The server is shutting down' },
  HOOKS_NOT_CONFIGURED: { httpStatus: 503, title: 'Webhooks are not configured on this server' },
  REQUEST_TIMEOUT: { httpStatus: 408, title: 'The request took too long to arrive' },
  HEADERS_TOO_LARGE: { httpStatus: 431, title: 'The request headers are too large' },
} as const satisfies Record<string, StatusAndTitle>;

export type HttpErrorCode = keyof typeof httpErrorCodes;
export type ProblemCode = HttpErrorCode | ErrorCode;

export interface ProblemError {
  file?: string;
  line?: number;
  column?: number;
  path: string;
  message: string;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  code: ProblemCode;
  detail: string;
  instance?: string;
  errors?: ProblemError[];
  migrationId?: string;
}

/** An error the HTTP layer raises on purpose; the error handler renders it as it is. */
export class HttpProblem extends Error {
  constructor(
    readonly code: ProblemCode,
    readonly detail: string,
    readonly extra: Partial<Pick<Problem, 'errors' | 'migrationId'>> & {
      headers?: Record<string, string>;
    } = {},
  ) {
    super(detail);
  }
}

function typeOf(code: ProblemCode): string {
  return `urn:cutover:problem:${code.toLowerCase().replaceAll('_', '-')}`;
}

function statusAndTitle(code: ProblemCode): { status: number; title: string } {
  if (code in httpErrorCodes) {
    const entry = httpErrorCodes[code as HttpErrorCode];
    return { status: entry.httpStatus, title: entry.title };
  }
  const entry = engineProblems[code as ErrorCode];
  return { status: entry.httpStatus, title: entry.title };
}

export function problem(
  code: ProblemCode,
  detail: string,
  extra: Partial<Pick<Problem, 'errors' | 'migrationId' | 'instance'>> = {},
): Problem {
  return { type: typeOf(code), ...statusAndTitle(code), code, detail, ...extra };
}

/**
 * Diagnostics of a topology as problem entries. A topology sent as an object has no lines of its
 * own: its entries carry the path only.
 */
export function diagnosticsToErrors(diagnostics: Diagnostic[], located: boolean): ProblemError[] {
  return diagnostics.map((d) =>
    located
      ? { file: d.file, line: d.line, column: d.column, path: d.path, message: d.message }
      : { path: d.path, message: d.message },
  );
}

/** Which of Fastify's own error codes mean what, for the errors Fastify raises before a handler. */
const fastifyCodes: Record<string, HttpErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'BAD_REQUEST',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'BAD_REQUEST',
  FST_ERR_CTP_INVALID_JSON_BODY: 'BAD_REQUEST',
  FST_ERR_CTP_INVALID_TYPE: 'BAD_REQUEST',
  FST_ERR_VALIDATION: 'BAD_REQUEST',
  FST_ERR_BAD_URL: 'BAD_REQUEST',
  FST_ERR_MAX_PARAM_LENGTH: 'URI_TOO_LONG',
  FST_ERR_ASYNC_CONSTRAINT: 'BAD_REQUEST',
};

interface FastifyLikeError extends Error {
  code?: string;
  statusCode?: number;
  validation?: { instancePath: string; message?: string; params?: Record<string, unknown> }[];
  validationContext?: string;
}

/**
 * Any error → a problem, and whether it is a bug (logged with its stack). Engine errors keep their
 * code; Fastify's client errors map to the HTTP codes; anything else is INTERNAL, without details.
 */
export function toProblem(error: unknown, instance: string): { problem: Problem; bug: boolean } {
  if (error instanceof HttpProblem) {
    return {
      problem: problem(error.code, error.detail, { ...withoutHeaders(error.extra), instance }),
      bug: false,
    };
  }
  if (error instanceof TopologyInvalidError) {
    return {
      problem: problem(error.code, error.message, {
        instance,
        errors: diagnosticsToErrors(error.diagnostics, true),
      }),
      bug: false,
    };
  }
  if (error instanceof CutoverError) {
    const details = error.details as { migrationId?: string } | undefined;
    const extra: Partial<Problem> = { instance };
    if (typeof details?.migrationId === 'string') extra.migrationId = details.migrationId;
    return { problem: problem(error.code, error.message, extra), bug: error.code === 'INTERNAL' };
  }
  const e = error as FastifyLikeError;
  if (e?.validation) {
    const where = e.validationContext ?? 'body';
    const label: Record<string, string> = {
      body: 'request body',
      querystring: 'query string',
      params: 'path parameters',
      headers: 'request headers',
    };
    return {
      problem: problem('BAD_REQUEST', `invalid ${label[where] ?? where}`, {
        instance,
        errors: e.validation.map((v) => ({
          path: `${where}${v.instancePath}${missingProperty(v.params)}`,
          message: v.message ?? 'is invalid',
        })),
      }),
      bug: false,
    };
  }
  const mapped = e?.code ? fastifyCodes[e.code] : undefined;
  if (mapped) return { problem: problem(mapped, e.message, { instance }), bug: false };
  if (typeof e?.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return {
      problem: { ...problem('BAD_REQUEST', e.message, { instance }), status: e.statusCode },
      bug: false,
    };
  }
  return {
    problem: problem('INTERNAL', 'the server failed to handle the request; see its log', { instance }),
    bug: true,
  };
}

function missingProperty(params: Record<string, unknown> | undefined): string {
  const name = params?.missingProperty ?? params?.additionalProperty;
  return typeof name === 'string' ? `/${name}` : '';
}

function withoutHeaders(extra: HttpProblem['extra']): Partial<Problem> {
  const { headers: _headers, ...rest } = extra;
  return rest;
}

/**
 * Errors Node's HTTP parser meets before any route runs (a request that never finishes arriving,
 * oversized headers, broken HTTP): answered as problems too, then the connection is closed.
 */
export function clientErrorResponse(error: { code?: string }): string {
  const [code, detail]: [ProblemCode, string] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? ['REQUEST_TIMEOUT', 'the request did not arrive in time']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? ['HEADERS_TOO_LARGE', 'the request headers exceed the limit']
        : ['BAD_REQUEST', 'the request is not valid HTTP'];
  const body = JSON.stringify(problem(code, detail));
  const { status } = statusAndTitle(code);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}
