/**
 * The hook runner against a real HTTP receiver on 127.0.0.1 and real commands in their own process
 * groups: passes, retries, failures with their reasons, timeouts and aborts.
 */
import { createHmac } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Hook, hookFailureRollsBack } from '../../../core/topology/hook-types.js';
import type { HookContext } from '../../../engine/hooks/hook-context.js';
import { runHook } from '../../../engine/hooks/run-hook.js';
import { runHookPoint } from '../../../engine/hooks/run-hook-point.js';
import { secretSource } from '../../../engine/secrets/secret-source.js';
import { procStat } from '../../../platform/process-identity.js';

const context: HookContext = {
  id: 'm-20261125-1.c4',
  environment: 'shop',
  migrationId: 'm-20261125-1',
  serial: 8,
  point: 'rollout',
  weight: 10,
  versions: { api: { blue: '1.0.0', green: '2.0.0' } },
  green: { api: ['127.0.0.1:4001', '127.0.0.1:4002'] },
};
const signingKey = 'k3y-for-tests';

interface Received {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

let dir: string;
let server: Server;
let base: string;
const received: Received[] = [];
/** Resolves with each request to /hang as it arrives, and with its connection's close. */
const hangs: Array<{ arrived: Promise<void>; closed: Promise<void> }> = [];
let arrivedNext: () => void = () => undefined;
let closedNext: () => void = () => undefined;
function expectHang() {
  const arrived = new Promise<void>((r) => {
    arrivedNext = r;
  });
  const closed = new Promise<void>((r) => {
    closedNext = r;
  });
  hangs.push({ arrived, closed });
  return { arrived, closed };
}
const counts = new Map<string, number>();

function receive(request: IncomingMessage, response: ServerResponse, body: string) {
  const url = request.url ?? '/';
  received.push({ path: url, headers: request.headers, body });
  const n = (counts.get(url) ?? 0) + 1;
  counts.set(url, n);
  if (url === '/flaky') {
    response.writeHead(n <= 2 ? 503 : 200).end(n <= 2 ? 'warming up' : 'ok');
  } else if (url === '/down') {
    response.writeHead(500).end(`database unreachable\n${'x'.repeat(500)}`);
  } else if (url === '/hang') {
    arrivedNext();
    request.socket.once('close', () => closedNext());
  } else {
    response.writeHead(204).end();
  }
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'cutover-hooks-'));
  server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => receive(request, response, body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

function options(signal = new AbortController().signal) {
  const lines: string[] = [];
  const secrets = secretSource({ CUTOVER_SECRET_HOOK_KEY: signingKey, CUTOVER_SECRET_TOKEN: 't0ken' }, dir);
  return { lines, options: { signal, log: (line: string) => lines.push(line), secrets, cwd: dir } };
}

function httpHook(name: string, urlPath: string, extra: Partial<Hook> = {}): Hook {
  return {
    name,
    http: {
      url: `${base}${urlPath}`,
      headers: { authorization: { secret: 'TOKEN' } },
      signingSecret: { secret: 'HOOK_KEY' },
    },
    retries: 2,
    retryDelay: 20,
    timeout: 5_000,
    ...extra,
  } as Hook;
}

function script(name: string, body: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

function commandHook(name: string, command: string[], extra: Partial<Hook> = {}): Hook {
  return { name, command, retries: 1, retryDelay: 20, timeout: 5_000, ...extra } as Hook;
}

/** Running, as the kernel sees it: a zombie (dead, waiting for its parent or init to reap it) is not. */
function alive(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== null && stat[0] !== 'Z' && stat[0] !== 'X';
}

async function waitForFile(file: string): Promise<string> {
  const until = Date.now() + 10_000;
  while (!existsSync(file) || readFileSync(file, 'utf8').trim() === '') {
    if (Date.now() > until) throw new Error(`${file} never appeared`);
    await sleep(10);
  }
  return readFileSync(file, 'utf8').trim();
}

describe('HTTP hooks', () => {
  it('POSTs the context, signed, and passes after two 503s with retries: 2', async () => {
    const { options: o, lines } = options();
    const result = await runHook(httpHook('smoke-test', '/flaky'), context, o);
    expect(result).toMatchObject({ ok: true, attempts: 3 });
    const requests = received.filter((r) => r.path === '/flaky');
    expect(requests).toHaveLength(3);
    for (const [i, r] of requests.entries()) {
      expect(JSON.parse(r.body)).toEqual({ hook: 'smoke-test', attempt: i + 1, ...context });
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers.authorization).toBe('t0ken');
      const timestamp = String(r.headers['x-cutover-timestamp']);
      const expected = createHmac('sha256', signingKey).update(`${timestamp}.${r.body}`).digest('hex');
      expect(r.headers['x-cutover-signature']).toBe(`sha256=${expected}`);
    }
    expect(lines[0]).toMatch(
      /^hook smoke-test \(POST http:\/\/127\.0\.0\.1:\d+\/flaky\) answered 503 \(attempt 1 of 3\)/,
    );
  });

  it('fails with the status and the first 200 characters of the body after its attempts', async () => {
    const { options: o } = options();
    const result = await runHook(httpHook('smoke-test', '/down'), context, o);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.attempts).toBe(3);
    expect(result.reason).toBe(
      `hook smoke-test (POST ${base}/down) answered 500 after 3 attempts: database unreachable ${'x'.repeat(179)}…`,
    );
  });

  it('times out a receiver that never answers, after the timeout and not before', async () => {
    const { options: o } = options();
    const { closed } = expectHang();
    const result = await runHook(httpHook('slow-check', '/hang', { retries: 0, timeout: 300 }), context, o);
    expect(result).toMatchObject({
      ok: false,
      attempts: 1,
      reason: `hook slow-check (POST ${base}/hang) timed out after 300ms`,
    });
    expect(result.ms).toBeGreaterThanOrEqual(290);
    await closed; // the request was dropped, not left open
  });

  it('stops at once when aborted, closing the request', async () => {
    const controller = new AbortController();
    const { options: o } = options(controller.signal);
    const { arrived, closed } = expectHang();
    const running = runHook(httpHook('slow-check', '/hang', { timeout: 60_000 }), context, o);
    await arrived;
    controller.abort();
    const result = await running;
    expect(result).toMatchObject({ ok: false, aborted: true, attempts: 1 });
    expect(result.ms).toBeLessThan(30_000);
    await closed;
  });

  it('names a receiver that is down and what to do, never an internal error', async () => {
    const { options: o } = options();
    const refused = `http://127.0.0.1:${await closedPort()}/check`;
    const hook = { ...httpHook('smoke-test', ''), retries: 0 } as Hook;
    if ('http' in hook) hook.http.url = refused;
    const result = await runHook(hook, context, o);
    expect(result).toMatchObject({
      ok: false,
      reason: `hook smoke-test (POST ${refused}) could not connect: nothing listens at ${new URL(refused).host} (ECONNREFUSED); start the receiver or correct the hook's url`,
    });
  });

  it('names a secret that is set nowhere, without calling the receiver', async () => {
    const { options: o } = options();
    const hook = httpHook('smoke-test', '/never');
    if ('http' in hook) hook.http.signingSecret = { secret: 'MISSING_KEY' };
    const result = await runHook(hook, context, o);
    expect(result).toMatchObject({ ok: false, attempts: 0 });
    expect(!result.ok && result.reason).toMatch(
      /^hook smoke-test \(POST .*\/never\): secret MISSING_KEY \(http\.signingSecret\) is not set: looked for \$CUTOVER_SECRET_MISSING_KEY/,
    );
    expect(received.some((r) => r.path === '/never')).toBe(false);
  });
});

describe('command hooks', () => {
  it('passes on exit 0, with the context on stdin and in CUTOVER_* variables', async () => {
    const out = path.join(dir, 'seen.txt');
    const file = script(
      'check.sh',
      `cat > ${out}.json; echo "$CUTOVER_HOOK $CUTOVER_HOOK_POINT $CUTOVER_WEIGHT $CUTOVER_MIGRATION_ID $CUTOVER_SERIAL|$CUTOVER_GREEN_ADDRESSES|$CUTOVER_GREEN_VERSIONS|$MODE" > ${out}`,
    );
    const { options: o } = options();
    const result = await runHook(
      commandHook('check', [file], { env: { MODE: 'strict' } } as Partial<Hook>),
      context,
      o,
    );
    expect(result).toMatchObject({ ok: true, attempts: 1 });
    expect(readFileSync(out, 'utf8').trim()).toBe(
      'check rollout 10 m-20261125-1 8|api=127.0.0.1:4001,127.0.0.1:4002|api=2.0.0|strict',
    );
    expect(JSON.parse(readFileSync(`${out}.json`, 'utf8'))).toEqual({
      hook: 'check',
      attempt: 1,
      ...context,
    });
  });

  it('fails at once on exit 1, with the last lines of stderr', async () => {
    const file = script('fail.sh', 'echo "checking" >&2; echo "3 of 40 checks failed" >&2; exit 1');
    const { options: o, lines } = options();
    const result = await runHook(commandHook('check', [file, '--all']), context, o);
    expect(result).toMatchObject({
      ok: false,
      attempts: 1,
      reason: `hook check (${file} --all) exited with code 1; last lines: checking | 3 of 40 checks failed`,
    });
    expect(lines).toEqual(['[hook check] checking', '[hook check] 3 of 40 checks failed']);
  });

  it('runs again after exit 75 and passes when the second run exits 0', async () => {
    const marker = path.join(dir, 'tempfail-once');
    const file = script('tempfail.sh', `if [ ! -e ${marker} ]; then touch ${marker}; exit 75; fi; exit 0`);
    const { options: o, lines } = options();
    const result = await runHook(commandHook('migrate-check', [file]), context, o);
    expect(result).toMatchObject({ ok: true, attempts: 2 });
    expect(lines).toEqual([
      `hook migrate-check (${file}) exited with code 75 (EX_TEMPFAIL) (attempt 1 of 2); again in 20ms`,
    ]);
  });

  it('kills the whole process group at once when aborted', async () => {
    const pids = path.join(dir, 'pids');
    const file = script('forever.sh', `sleep 1000 & echo "$$ $!" > ${pids}; wait`);
    const controller = new AbortController();
    const { options: o } = options(controller.signal);
    const running = runHook(commandHook('load-test', [file], { timeout: 60_000 }), context, o);
    const [shell, child] = (await waitForFile(pids)).split(' ').map(Number) as [number, number];
    expect(alive(shell) && alive(child)).toBe(true);
    controller.abort();
    const result = await running;
    expect(result).toMatchObject({ ok: false, aborted: true, attempts: 1 });
    expect(alive(shell)).toBe(false);
    expect(alive(child)).toBe(false);
  });

  it('says how to fix a program that is not installed, and does not retry it', async () => {
    const { options: o } = options();
    const result = await runHook(
      commandHook('load-test', ['k6-not-installed', 'run', 'load.js']),
      context,
      o,
    );
    expect(result).toMatchObject({
      ok: false,
      attempts: 1,
      reason:
        'hook load-test (k6-not-installed run load.js) could not start: program not found (ENOENT); install it, put it on the PATH, or give its full path',
    });
  });
});

/** A port that was free a moment ago and has nothing listening. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe('values Node refuses', () => {
  it('fails with the reason, not a rejection, for a header secret holding a line break', async () => {
    const { options: o } = options();
    o.secrets = secretSource({ CUTOVER_SECRET_TOKEN: 'two\nlines' }, dir);
    const hook = httpHook('smoke-test', '/never-sent');
    if ('http' in hook) delete hook.http.signingSecret;
    const result = await runHook(hook, context, o);
    expect(result).toMatchObject({ ok: false, attempts: 1 });
    expect(!result.ok && result.reason).toMatch(
      /^hook smoke-test \(POST .*\/never-sent\) could not run: .*header/i,
    );
    expect(!result.ok && result.reason).not.toContain('two');
  });
});

describe('a hook point', () => {
  it('runs its hooks in order and stops at the first failure, which is the point’s reason', async () => {
    const order = path.join(dir, 'order.txt');
    const first = script('first.sh', `echo "first $CUTOVER_HOOK_POINT" >> ${order}`);
    const failing = script('failing.sh', `echo "second" >> ${order}; echo "bad gate" >&2; exit 3`);
    const third = script('third.sh', `echo "third" >> ${order}`);
    const hooks = {
      confirmPromotion: [
        commandHook('first', [first]),
        commandHook('gate', [failing]),
        commandHook('never', [third]),
      ],
    };
    const { options: o, lines } = options();
    const { point: _, ...rest } = context;
    const result = await runHookPoint(hooks, 'confirmPromotion', rest, o);
    expect(result).toMatchObject({
      ok: false,
      failed: 'gate',
      reason: `hook gate (${failing}) exited with code 3; last lines: bad gate`,
    });
    expect(result.ran.map((r) => r.name)).toEqual(['first', 'gate']);
    expect(readFileSync(order, 'utf8')).toBe('first confirmPromotion\nsecond\n');
    expect(lines[0]).toMatch(new RegExp(`^hook first \\(${first}\\) passed in \\d+ ms$`));
    expect(hookFailureRollsBack('confirmPromotion')).toBe(true);
    expect(hookFailureRollsBack('postRollout')).toBe(false);
  });

  it('passes when the point has no hooks', async () => {
    const { options: o } = options();
    const { point: _, ...rest } = context;
    expect(await runHookPoint(undefined, 'preRollout', rest, o)).toEqual({ ok: true, ran: [] });
  });
});
