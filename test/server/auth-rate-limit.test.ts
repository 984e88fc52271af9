/**
 * Failed authentication is rate limited by client address: a client guessing tokens gets 429 once
 * it has spent its address's budget, however many different tokens it tries (each used to get a
 * bucket of its own, so guessing was never limited). A valid token keeps its own budget, even from
 * that same address; another address keeps its own. Requests go out from 127.0.0.1 and 127.0.0.2
 * (both loopback) to the server (built in process, listening on 127.0.0.1).
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type InProcessServer, ServerHarness } from '../support/server.js';

const viewerToken = 'viewer-token-0a1b2c3d4e5f6a7b';
const limit = 30;

const harness = new ServerHarness();
let server: InProcessServer;

beforeAll(async () => {
  server = await harness.startInProcess({
    stateDir: await harness.stateDir(),
    args: ['--rate-limit', String(limit), '--log-level', 'warn'],
    env: { CUTOVER_TOKENS: `dash:viewer:${viewerToken}` },
    listen: true,
  });
}, 30_000);

afterAll(async () => {
  await harness.cleanup();
}, 60_000);

interface Answer {
  status: number;
  code: string | undefined;
  retryAfter: string | undefined;
}

/** GET a viewer route from a given loopback source address, on a connection of its own. */
function get(pathname: string, token: string | null, from: string): Promise<Answer> {
  const { hostname, port } = new URL(server.url as string);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: hostname,
        port,
        path: pathname,
        localAddress: from,
        agent: false,
        headers: token === null ? {} : { authorization: `Bearer ${token}` },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => {
          let code: string | undefined;
          try {
            code = (JSON.parse(text) as { code?: string }).code;
          } catch {
            code = undefined;
          }
          const retryAfter = res.headers['retry-after'];
          resolve({ status: res.statusCode as number, code, retryAfter });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const randomToken = () => randomBytes(24).toString('hex');

it('bad tokens from one address get 429 after the limit; a good token and another address do not', async () => {
  const statuses: number[] = [];
  for (let i = 0; i < limit + 5; i++) {
    const r = await get('/v1/migrations', randomToken(), '127.0.0.1');
    statuses.push(r.status);
    if (r.status === 429) {
      expect(r.code).toBe('RATE_LIMITED');
      expect(Number(r.retryAfter)).toBeGreaterThan(0);
    }
  }
  expect(statuses.slice(0, limit)).toEqual(Array(limit).fill(401));
  expect(statuses.slice(limit)).toEqual(Array(5).fill(429));
  // No token at all counts toward the same address's budget.
  expect((await get('/v1/migrations', null, '127.0.0.1')).status).toBe(429);

  // The valid token has a budget of its own: it still works from that very address.
  const good = await get('/v1/migrations', viewerToken, '127.0.0.1');
  expect(good.status).toBe(200);
  // Another address has its own budget: its bad token is told it is bad, not rate limited.
  const other = await get('/v1/migrations', randomToken(), '127.0.0.2');
  expect(other.status).toBe(401);
  expect(other.code).toBe('UNAUTHORIZED');
});
