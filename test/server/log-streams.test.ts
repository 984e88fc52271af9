/**
 * Live log streams (`GET /v1/migrations/:id/logs?follow=true`) are bounded: at most
 * --max-log-streams-per-token per token and --max-log-streams overall; beyond, 429 as a problem
 * with Retry-After. A stream that closes frees its slot. And streams of one migration share one
 * reader of its log: the server's reads do not grow with the number of streams.
 */
import { readFileSync } from 'node:fs';
import { type IncomingMessage, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Api, demoApply, ServerHarness, type ServerProcess } from '../support/server.js';

const tokens = {
  a: 'viewer-a-token-0123456789abcdef',
  b: 'viewer-b-token-0123456789abcdef',
  c: 'viewer-c-token-0123456789abcdef',
  op: 'operator-token-0123456789abcdef',
};
const perToken = 3;
const overall = 6;

const harness = new ServerHarness();
let server: ServerProcess;
let api: Api;
let migrationId: string;

beforeAll(async () => {
  ({ server, api } = await harness.serve(
    {
      args: [
        '--rate-limit',
        '0',
        '--max-log-streams',
        String(overall),
        '--max-log-streams-per-token',
        String(perToken),
      ],
      env: {
        CUTOVER_TOKENS: `a:viewer:${tokens.a},b:viewer:${tokens.b},c:viewer:${tokens.c},op:operator:${tokens.op}`,
      },
    },
    tokens.op,
  ));
  // A migration that stays in flight (a ten-minute bake) for as long as the tests follow it.
  const r = await api.post('/v1/apply', demoApply({ name: 'streams', bake: '10m', commit: 'auto' }));
  expect(r.status).toBe(202);
  migrationId = r.json.summary.id as string;
  await api.waitFor(migrationId, (s) => s.status.includes('bake'));
}, 60_000);

afterAll(() => harness.cancelThenCleanup(api, migrationId ? [migrationId] : []), 60_000);

interface Stream {
  status: number;
  headers: IncomingMessage['headers'];
  body: Promise<string>;
  close(): void;
}

/** Opens a follow stream on a connection of its own; resolves with the response's head. */
function openStream(token: string): Promise<Stream> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: hostname,
        port,
        path: `/v1/migrations/${migrationId}/logs?follow=true`,
        agent: false,
        headers: { authorization: `Bearer ${token}` },
      },
      (res) => {
        let text = '';
        const body = new Promise<string>((done) => {
          res.setEncoding('utf8').on('data', (chunk: string) => {
            text += chunk;
          });
          res.on('end', () => done(text));
          res.on('close', () => done(text));
        });
        resolve({ status: res.statusCode as number, headers: res.headers, body, close: () => req.destroy() });
      },
    );
    req.on('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end();
  });
}

const opened: Stream[] = [];
async function open(token: string): Promise<Stream> {
  const stream = await openStream(token);
  opened.push(stream);
  return stream;
}

afterAll(() => {
  for (const s of opened) s.close();
});

async function expectRefused(token: string, scope: RegExp): Promise<void> {
  const refused = await open(token);
  expect(refused.status).toBe(429);
  expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
  const problem = JSON.parse(await refused.body) as { code: string; detail: string };
  expect(problem.code).toBe('TOO_MANY_LOG_STREAMS');
  expect(problem.detail).toMatch(scope);
}

it('at most N streams per token and M overall: 429 beyond, and a closed stream frees its slot', async () => {
  const ofA = [];
  for (let i = 0; i < perToken; i++) {
    const s = await open(tokens.a);
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toMatch(/^text\/event-stream/);
    ofA.push(s);
  }
  await expectRefused(tokens.a, /token a .*--max-log-streams-per-token/);
  for (let i = 0; i < overall - perToken; i++) expect((await open(tokens.b)).status).toBe(200);
  // c has no stream open, but the server has all it allows.
  await expectRefused(tokens.c, /server has 6 log streams open.*\(--max-log-streams\)/);
  await api.gaugeReaches('cutover_log_streams', overall);

  // One of a's streams closes: once the server has seen it go, c gets that slot.
  (ofA[0] as Stream).close();
  await api.gaugeReaches('cutover_log_streams', overall - 1);
  const ofC = await open(tokens.c);
  expect(ofC.status).toBe(200);
  await expectRefused(tokens.a, /\(--max-log-streams\)/);

  for (const s of opened) s.close();
  await api.gaugeReaches('cutover_log_streams', 0);
});

/** Read system calls the server process made so far (Linux: /proc/<pid>/io). */
function readCalls(): number {
  const io = readFileSync(`/proc/${server.pid}/io`, 'utf8');
  return Number(/^syscr: (\d+)$/m.exec(io)?.[1]);
}

/** The server's read calls per second over a window, with the streams it has open. */
async function readRate(windowMs: number): Promise<number> {
  const before = readCalls();
  await sleep(windowMs);
  return ((readCalls() - before) * 1000) / windowMs;
}

it('streams of one migration share one reader: 1 stream or 6 cost the server the same reads', async () => {
  const one = await openStream(tokens.a);
  expect(one.status).toBe(200);
  await api.gaugeReaches('cutover_log_streams', 1);
  const single = await readRate(2000);

  const more: Stream[] = [];
  for (const token of [tokens.a, tokens.a, tokens.b, tokens.b, tokens.b]) more.push(await openStream(token));
  expect(more.map((s) => s.status)).toEqual([200, 200, 200, 200, 200]);
  await api.gaugeReaches('cutover_log_streams', overall);
  const six = await readRate(2000);
  expect(await api.gauge('cutover_log_readers')).toBe(1);
  // Each stream polling on its own read the journal 5 times a second: six streams, six times the reads.
  expect(six, `reads/s with 1 stream: ${single.toFixed(0)}, with 6: ${six.toFixed(0)}`).toBeLessThan(
    single * 2 + 10,
  );
  for (const s of [one, ...more]) s.close();
  await api.gaugeReaches('cutover_log_streams', 0);
  await api.gaugeReaches('cutover_log_readers', 0);
});
