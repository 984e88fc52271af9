import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { CutoverError } from '../../core/errors.js';
import { type MigrationState, type Verb, type VerbOptions, verbs } from '../../core/migration/types.js';
import { type LoopbackAnswer, loopbackRequest } from '../../platform/loopback-http.js';
import type { LocalRunner } from './local-runner.js';
import type { RunnerRecord } from './runner-claim.js';

/** Time a CLI waits for a runner to answer a verb before saying it does not. */
export const controlTimeoutMs = 10_000;

/**
 * The runner's control endpoint: HTTP on 127.0.0.1 only, a random bearer token kept in the
 * runner record (mode 0600). Other terminals send verbs here; the answer comes after the verb is
 * journaled, so an acknowledged verb is durable.
 */
export async function startControlServer(
  getRunner: () => LocalRunner | undefined,
): Promise<{ server: Server; port: number; token: string }> {
  const token = randomBytes(24).toString('hex');
  const expected = Buffer.from(`Bearer ${token}`);
  const server = createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const auth = Buffer.from(req.headers.authorization ?? '');
    if (auth.length !== expected.length || !timingSafeEqual(auth, expected))
      return send(401, { error: 'unauthorized' });
    const runner = getRunner();
    if (!runner) return send(503, { error: 'starting' });
    if (req.method === 'GET' && req.url === '/state') return send(200, { state: runner.current });
    if (req.method !== 'POST' || req.url !== '/verb') return send(404, { error: 'not found' });
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
      if (body.length > 4096) req.destroy();
    });
    req.on('end', () => {
      let request: { verb?: Verb; by?: string; full?: boolean };
      try {
        request = JSON.parse(body) as { verb?: Verb; by?: string; full?: boolean };
      } catch {
        return send(400, { error: 'body is not JSON' });
      }
      if (!request.verb || !verbs.includes(request.verb)) return send(400, { error: 'unknown verb' });
      let result: ReturnType<LocalRunner['verb']>;
      try {
        result = runner.verb(request.verb, request.by, { full: request.full === true });
      } catch (error) {
        // Not journaled (the disk refused): not taken. The runner has stopped; say why.
        return send(503, { error: (error as Error).message });
      }
      return send(result.ok ? 200 : 409, result);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string')
    throw new CutoverError('INTERNAL', 'control server has no port');
  // Not unref'd: a runner waiting for an operator (paused, awaiting commit) has nothing else
  // keeping its process alive.
  return { server, port: address.port, token };
}

export type RemoteVerbResult =
  | { ok: true; state: MigrationState }
  | { ok: false; refusal: string; state: MigrationState };

export async function sendVerbToRunner(
  record: RunnerRecord,
  verb: Verb,
  by?: string,
  options: VerbOptions = {},
): Promise<RemoteVerbResult> {
  let answer: LoopbackAnswer;
  try {
    answer = await loopbackRequest({
      method: 'POST',
      host: '127.0.0.1',
      port: record.port,
      path: '/verb',
      headers: { authorization: `Bearer ${record.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(options.full ? { verb, by, full: true } : { verb, by }),
      timeoutMs: controlTimeoutMs,
    });
  } catch (error) {
    throw new CutoverError(
      'RUNNER_UNREACHABLE',
      `the runner of ${record.migrationId} (pid ${record.process.pid}) does not answer: ${(error as Error).message}`,
    );
  }
  if (answer.status !== 200 && answer.status !== 409) {
    let reason = '';
    try {
      reason = (JSON.parse(answer.body) as { error?: string }).error ?? '';
    } catch {
      // not JSON: the status is all there is
    }
    throw new CutoverError(
      'RUNNER_UNREACHABLE',
      `the runner of ${record.migrationId} answered HTTP ${answer.status}${reason ? `: ${reason}` : ''}`,
    );
  }
  return JSON.parse(answer.body) as RemoteVerbResult;
}
