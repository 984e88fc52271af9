/**
 * Who may call what, and how often: the requests' identity (a bearer token, else the client's
 * address), the rate limit counted by it, and the route's refusal of credentials that do not do.
 * The refusal is answered only after the rate limit has counted the request.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bearerToken, type Principal, type TokenStore } from './auth.js';
import { HttpProblem } from './problems.js';
import type { RouteContext } from './route-context.js';

/**
 * Who is asking, and whether the route refuses them. The refusal is not thrown here: the rate
 * limit runs first, so that failed authentication is counted (by client address).
 */
export function identify(
  request: FastifyRequest,
  tokens: TokenStore | null,
): { principal: Principal | null; refusal: HttpProblem | null } {
  const access = request.routeOptions.config.access ?? 'public';
  if (tokens === null) return { principal: { name: 'anonymous', role: 'operator' }, refusal: null };
  const header = request.headers.authorization;
  const token = bearerToken(header);
  const principal = token === undefined ? null : tokens.verify(token);
  if (access === 'public') return { principal, refusal: null };
  if (header === undefined) {
    return {
      principal,
      refusal: new HttpProblem('UNAUTHORIZED', 'send a bearer token: Authorization: Bearer <token>', {
        headers: { 'www-authenticate': 'Bearer realm="cutover"' },
      }),
    };
  }
  if (principal === null) {
    return {
      principal,
      refusal: new HttpProblem('UNAUTHORIZED', 'the bearer token is not valid', {
        headers: { 'www-authenticate': 'Bearer realm="cutover", error="invalid_token"' },
      }),
    };
  }
  if (access === 'operator' && principal.role !== 'operator') {
    return {
      principal,
      refusal: new HttpProblem(
        'FORBIDDEN',
        `token ${principal.name} is a ${principal.role}; this needs an operator`,
      ),
    };
  }
  return { principal, refusal: null };
}

/**
 * Requests per minute, counted per valid token, else per client address: a request with a token
 * that is not valid counts toward its address, so guessing tokens is limited like anything else
 * (a fresh random token must not buy a fresh budget). Every request counts, unknown routes too.
 */
export async function registerRateLimit(app: FastifyInstance, context: RouteContext): Promise<void> {
  const perMinute = context.options.rateLimitPerMinute ?? 600;
  if (perMinute <= 0) return;
  await app.register(rateLimit, {
    global: false,
    max: perMinute,
    timeWindow: 60_000,
    keyGenerator: (request) => context.clientOf(request).key,
    errorResponseBuilder: (_request, limit) =>
      new HttpProblem(
        'RATE_LIMITED',
        `more than ${limit.max} requests in ${limit.after}; retry after ${Math.ceil(limit.ttl / 1000)} s`,
      ),
  });
  app.addHook('onRequest', app.rateLimit());
}
