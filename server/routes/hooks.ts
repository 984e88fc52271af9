/**
 * `POST /v1/hooks/git`: a Git host's push webhook, signed in GitHub's style (`X-Hub-Signature-256:
 * sha256=<HMAC-SHA256 of the raw body>`). A verified push drops a trigger into
 * `<state>/watch/hooks/`, where `cutover watch` (same state directory) fetches at once.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type RouteContext, routeSchema } from '../app.js';
import { HttpProblem } from '../problems.js';

/** Is `header` (`sha256=<hex>`) the HMAC-SHA256 of `body` under `secret`? Constant time. */
export function signatureMatches(secret: string, body: Buffer, header: string | undefined): boolean {
  if (header === undefined) return false;
  const match = /^sha256=([0-9a-f]{64})$/i.exec(header.trim());
  if (!match) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return timingSafeEqual(expected, Buffer.from(match[1] as string, 'hex'));
}

export function registerHookRoutes(app: FastifyInstance, context: RouteContext): void {
  void app.register(async (scope) => {
    // The signature covers the bytes as sent: keep them, parse after verifying.
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) =>
      done(null, body),
    );
    // GitHub's default content type: the JSON is the form's `payload` field; signed as sent, too.
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'buffer' },
      (_request, body, done) => done(null, body),
    );
    scope.post(
      '/v1/hooks/git',
      routeSchema('public', {
        summary: 'A Git push webhook: `cutover watch` on this state directory fetches at once',
        description:
          'Signed with a shared secret (`--hook-secret-file` or `CUTOVER_HOOK_SECRET`) as `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body, hex>`, as GitHub, Gitea and others send it. 202 when a fetch was triggered; 200 for a `ping` event; 401 UNAUTHORIZED for a missing or wrong signature; 503 HOOKS_NOT_CONFIGURED without a secret.',
        tags: ['hooks'],
        headers: {
          type: 'object',
          properties: {
            'x-hub-signature-256': {
              type: 'string',
              description: '`sha256=` and the hex HMAC-SHA256 of the raw body',
            },
            'x-github-event': { type: 'string', description: '`push` (default) or `ping`' },
          },
        },
        response: {
          200: { type: 'object', properties: { pong: { const: true } } },
          202: { type: 'object', properties: { triggered: { const: true } } },
        },
      }),
      async (request, reply) => {
        const secret = context.options.hookSecret;
        if (!secret) {
          throw new HttpProblem(
            'HOOKS_NOT_CONFIGURED',
            'this server has no webhook secret: start it with --hook-secret-file or CUTOVER_HOOK_SECRET',
          );
        }
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const signature = request.headers['x-hub-signature-256'];
        if (!signatureMatches(secret, body, typeof signature === 'string' ? signature : undefined)) {
          throw new HttpProblem(
            'UNAUTHORIZED',
            'the webhook signature (X-Hub-Signature-256) is missing or wrong',
          );
        }
        if (request.headers['x-github-event'] === 'ping') return reply.code(200).send({ pong: true });
        let push: { ref?: unknown; after?: unknown; repository?: { clone_url?: unknown } } = {};
        try {
          const text = body.toString('utf8');
          const form = /^application\/x-www-form-urlencoded\b/i.test(request.headers['content-type'] ?? '');
          push = JSON.parse(form ? (new URLSearchParams(text).get('payload') ?? '') : text) as typeof push;
        } catch {
          // a signed body that is not JSON still triggers a fetch
        }
        const dir = path.join(context.options.stateDir, 'watch', 'hooks');
        mkdirSync(dir, { recursive: true });
        const name = `${Date.now()}-${randomBytes(4).toString('hex')}.json`;
        const trigger = {
          receivedAt: Date.now(),
          ref: typeof push.ref === 'string' ? push.ref : undefined,
          after: typeof push.after === 'string' ? push.after : undefined,
          repository: typeof push.repository?.clone_url === 'string' ? push.repository.clone_url : undefined,
        };
        // Written aside and renamed in, so that a watcher never reads half a trigger.
        writeFileSync(path.join(dir, `.${name}`), JSON.stringify(trigger));
        renameSync(path.join(dir, `.${name}`), path.join(dir, name));
        request.log.info({ ref: trigger.ref, after: trigger.after }, 'git webhook: fetch triggered');
        return reply.code(202).send({ triggered: true });
      },
    );
  });
}
