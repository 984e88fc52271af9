/**
 * The Git webhook acts on each delivery once: a signed delivery sent again (as it was, or under
 * another delivery id) is answered 200 `{ "replayed": true }` and does nothing, also after the
 * server restarts (a provider's redelivery is not marked failed, and a captured delivery cannot
 * make watchers fetch at will); a push whose signed timestamp (GitHub's `repository.pushed_at`,
 * epoch seconds in a push) is too old is refused with 409 HOOK_TOO_OLD. A `ping`, whatever its
 * `pushed_at` (an ISO date in every event but a push), is answered 200, each time.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { cleanUp, scratch, startServer, trackStateDir } from '../support/git.js';

afterEach(cleanUp);

const secret = 'hook-secret-for-replays';

function sign(body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

async function deliver(
  url: string,
  body: string,
  delivery: string | null,
  event = 'push',
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${url}/v1/hooks/git`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': event,
      'x-hub-signature-256': sign(body),
      ...(delivery === null ? {} : { 'x-github-delivery': delivery }),
    },
    body,
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

function push(after: string, pushedAt?: number): string {
  return JSON.stringify({
    ref: 'refs/heads/main',
    after,
    repository: { clone_url: 'file:///nowhere', ...(pushedAt === undefined ? {} : { pushed_at: pushedAt }) },
  });
}

const nowS = () => Math.floor(Date.now() / 1000);

it('a delivery sent again does nothing (200 replayed), also after a restart; a push too old is refused', async () => {
  const stateDir = trackStateDir(path.join(await scratch(), 'state'));
  const hooks = path.join(stateDir, 'watch', 'hooks');
  const triggers = () => readdirSync(hooks).filter((f) => !f.startsWith('.'));
  let server = await startServer(stateDir, { CUTOVER_HOOK_SECRET: secret });
  const replayed = { status: 200, json: { replayed: true } };

  const first = push('a'.repeat(40), nowS());
  const id = randomUUID();
  expect(await deliver(server.url, first, id)).toEqual({ status: 202, json: { triggered: true } });
  // The same delivery again (a provider's redelivery, or a replay): taken, nothing done.
  expect(await deliver(server.url, first, id)).toEqual(replayed);
  // The same signed body under a new delivery id: the id is not signed, the body is.
  expect(await deliver(server.url, first, randomUUID())).toEqual(replayed);
  // Another signed body under the first one's id is another push: only the secret's holder signs.
  expect((await deliver(server.url, push('e'.repeat(40), nowS()), id)).status).toBe(202);
  // Without any delivery id: the signed body alone is remembered.
  const bare = push('b'.repeat(40));
  expect((await deliver(server.url, bare, null)).status).toBe(202);
  expect(await deliver(server.url, bare, null)).toEqual(replayed);

  // A push signed two hours ago: too old to be a fresh delivery.
  const old = await deliver(server.url, push('c'.repeat(40), nowS() - 2 * 3600), randomUUID());
  expect(old.status).toBe(409);
  expect(old.json.code).toBe('HOOK_TOO_OLD');
  expect(String(old.json.detail)).toMatch(/pushed_at/);

  // Only the three deliveries acted on dropped a trigger.
  expect(triggers()).toHaveLength(3);

  // A restarted server still knows what it took.
  await server.process.stop();
  server = await startServer(stateDir, { CUTOVER_HOOK_SECRET: secret });
  expect(await deliver(server.url, first, id)).toEqual(replayed);
  // And a new push is taken as ever.
  expect((await deliver(server.url, push('d'.repeat(40), nowS()), randomUUID())).status).toBe(202);
  expect(triggers()).toHaveLength(4);
});

it('answers a ping (pushed_at an ISO date of yesterday) with 200, each time, and records nothing', async () => {
  const stateDir = trackStateDir(path.join(await scratch(), 'state'));
  const server = await startServer(stateDir, { CUTOVER_HOOK_SECRET: secret });
  // GitHub's ping, as every event but a push, carries pushed_at as an ISO date.
  const ping = JSON.stringify({
    zen: 'Keep it logically awesome.',
    hook_id: 1,
    repository: {
      clone_url: 'file:///nowhere',
      pushed_at: new Date(Date.now() - 24 * 3600 * 1000).toISOString(),
    },
  });
  const id = randomUUID();
  expect(await deliver(server.url, ping, id, 'ping')).toEqual({ status: 200, json: { pong: true } });
  // Redelivered from the provider's page: the same body and id.
  expect(await deliver(server.url, ping, id, 'ping')).toEqual({ status: 200, json: { pong: true } });
  expect(existsSync(path.join(stateDir, 'watch', 'hooks'))).toBe(false);
  const records = path.join(stateDir, 'server', 'hook-deliveries');
  expect(existsSync(records) ? readdirSync(records) : []).toEqual([]);
});
