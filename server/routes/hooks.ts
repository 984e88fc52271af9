/**
 * `POST /v1/hooks/git`: a Git host's push webhook, signed in GitHub's style (`X-Hub-Signature-256:
 * sha256=<HMAC-SHA256 of the raw body>`). A verified push drops a trigger into
 * `<state>/watch/hooks/`, where `cutover watch` (same state directory) fetches at once.
 *
 * Each delivery is acted on once: one sent again within the replay window (the same signed body)
 * is answered 200 `{ "replayed": true }` and does nothing (a provider's redelivery is not marked
 * failed; a captured delivery cannot make watchers fetch at will), and a push whose signed
 * timestamp is older than `hookMaxAgeMs` is refused (409 HOOK_TOO_OLD).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { environmentFault } from '../../core/errors.js';
import { DeliveryLog } from '../hook-deliveries.js';
import { HttpProblem } from '../problems.js';
import { type RouteContext, routeSchema } from '../route-context.js';

/**
 * A push signed longer ago than this is refused. Providers deliver within seconds, and a delivery
 * refused for age loses nothing: the watcher's interval fetch finds the commit anyway.
 */
export const hookMaxAgeMs = 60 * 60 * 1000;

/**
 * The fields of a push's `repository` that name it, copied into its trigger: each watcher on the
 * state directory takes only the triggers that name its own repository (watch/hook-triggers.ts).
 */
const repositoryNameFields = ['clone_url', 'ssh_url', 'html_url', 'full_name'] as const;

interface PushPayload {
  ref?: unknown;
  after?: unknown;
  repository?: { pushed_at?: unknown } & Partial<Record<(typeof repositoryNameFields)[number], unknown>>;
}

/** Is `header` (`sha256=<hex>`) the HMAC-SHA256 of `body` under `secret`? Constant time. */
export function signatureMatches(secret: string, body: Buffer, header: string | undefined): boolean {
  if (header === undefined) return false;
  const match = /^sha256=([0-9a-f]{64})$/i.exec(header.trim());
  if (!match) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return timingSafeEqual(expected, Buffer.from(match[1] as string, 'hex'));
}

export function registerHookRoutes(app: FastifyInstance, context: RouteContext): void {
  const deliveries = new DeliveryLog(context.options.stateDir.hookDeliveriesDir());
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
          'Signed with a shared secret (`--hook-secret-file` or `CUTOVER_HOOK_SECRET`) as `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body, hex>`, as GitHub, Gitea and others send it. 202 when a fetch was triggered; 200 `{ pong: true }` for a `ping` event; 200 `{ replayed: true }`, doing nothing, for a delivery already acted on (the same signed body within 24 hours, whatever its delivery id); 401 UNAUTHORIZED for a missing or wrong signature; 409 HOOK_TOO_OLD for a push whose `repository.pushed_at` is more than an hour old; 503 HOOKS_NOT_CONFIGURED without a secret.',
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
          200: {
            description: 'A `ping`, or a delivery already acted on (sent again): nothing done',
            type: 'object',
            properties: { pong: { const: true }, replayed: { const: true } },
          },
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
        const event = request.headers['x-github-event'] ?? 'push';
        // A ping says the hook is set up: answered each time (a provider's "redeliver" included),
        // whatever its age, and not recorded, as it triggers nothing.
        if (event === 'ping') return reply.code(200).send({ pong: true });
        const push = parsePush(body, request.headers['content-type']);
        if (event === 'push') refuseStale(push);
        const seenAt = deliveries.record(signature as string);
        if (seenAt !== null) {
          request.log.info(
            { takenAt: new Date(seenAt).toISOString() },
            'git webhook: a delivery already acted on, sent again; nothing done',
          );
          return reply.code(200).send({ replayed: true });
        }
        const dir = context.options.stateDir.watchHooksDir();
        const name = `${Date.now()}-${randomBytes(4).toString('hex')}.json`;
        const trigger = {
          receivedAt: Date.now(),
          ref: typeof push.ref === 'string' ? push.ref : undefined,
          after: typeof push.after === 'string' ? push.after : undefined,
          repository: repositoryNames(push),
        };
        // Written aside and renamed in, so that a watcher never reads half a trigger.
        try {
          mkdirSync(dir, { recursive: true });
          writeFileSync(path.join(dir, `.${name}`), JSON.stringify(trigger));
          renameSync(path.join(dir, `.${name}`), path.join(dir, name));
        } catch (error) {
          // Not acted on: the provider's retry must be taken.
          deliveries.forget(signature as string);
          throw environmentFault(error, `writing a webhook trigger into ${dir}`) ?? error;
        }
        request.log.info({ ref: trigger.ref, after: trigger.after }, 'git webhook: fetch triggered');
        return reply.code(202).send({ triggered: true });
      },
    );
  });
}

/** What names the repository pushed to, as the push gave it; undefined when it names none. */
function repositoryNames(push: PushPayload): Record<string, string> | undefined {
  const names: Record<string, string> = {};
  for (const field of repositoryNameFields) {
    const value = push.repository?.[field];
    if (typeof value === 'string' && value !== '') names[field] = value;
  }
  return Object.keys(names).length > 0 ? names : undefined;
}

/** The push a signed body describes; empty when the body is not JSON (it still triggers a fetch). */
function parsePush(body: Buffer, contentType: string | undefined): PushPayload {
  try {
    const text = body.toString('utf8');
    const form = /^application\/x-www-form-urlencoded\b/i.test(contentType ?? '');
    const value = JSON.parse(form ? (new URLSearchParams(text).get('payload') ?? '') : text) as unknown;
    return value !== null && typeof value === 'object' ? (value as PushPayload) : {};
  } catch {
    return {};
  }
}

/**
 * Refuses a push signed too long ago. The timestamp is GitHub's `repository.pushed_at`, inside the
 * signed body (a replay cannot change it). Only a push's is the time of this delivery's push, in
 * epoch seconds; every other event carries an ISO date there, the repository's last push, which
 * may be any age.
 */
function refuseStale(push: PushPayload, now = Date.now()): void {
  const raw = push.repository?.pushed_at;
  if (typeof raw !== 'number') return;
  const at = raw * 1000;
  if (!Number.isFinite(at) || now - at <= hookMaxAgeMs) return;
  throw new HttpProblem(
    'HOOK_TOO_OLD',
    `the push was signed with repository.pushed_at ${new Date(at).toISOString()}, ${Math.round((now - at) / 1000)} s ago; deliveries older than ${hookMaxAgeMs / 60_000} min are refused as possible replays (the watcher's interval fetch still finds the commit)`,
  );
}
