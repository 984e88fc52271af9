/**
 * One delivery attempt to one target: a signed webhook POST, a Slack-compatible POST, or a command
 * with the event on stdin. With `node:http`/`node:https`, not `fetch`: a runner's first `fetch`
 * compiles undici's parser (about 30 ms of CPU) at the moment the migration starts moving traffic.
 */
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import type { CloudEvent } from '../../core/notify/types.js';
import type { NotifyTarget, NotifyUrl } from '../../core/topology/types.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import type { SecretSource } from '../secrets/secret-source.js';

/** How an attempt ended: `retryable` says whether another attempt may do better. */
export type AttemptResult =
  | { ok: true; status?: number }
  | { ok: false; error: string; retryable: boolean; status?: number };

export const signatureHeader = 'x-cutover-signature';
export const timestampHeader = 'x-cutover-timestamp';
export const eventIdHeader = 'x-cutover-event-id';

/** `sha256=<hex>` of HMAC-SHA256(key, `<timestamp>.<raw body>`): what a receiver recomputes. */
export function signatureOf(key: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', key).update(`${timestamp}.${body}`).digest('hex')}`;
}

export interface SendContext {
  secrets: SecretSource;
  /** The topology's directory: a relative command resolves here. */
  baseDir: string;
  timeoutMs: number;
  now: () => number;
  /**
   * Aborted when the delivery is abandoned (the process driving the migration exits): the attempt
   * ends at once, its request destroyed or its command's process group killed, so nothing it
   * started outlives the grace or keeps the process up.
   */
  abandon?: AbortSignal;
}

/** How an attempt ends when its delivery is abandoned (the notifier records it as `abandoned`). */
const abandonedAttempt: AttemptResult = { ok: false, retryable: false, error: 'abandoned' };

/** Calls `stop` once when `signal` aborts (at once if it has); returns what removes the listener. */
function onAbandon(signal: AbortSignal | undefined, stop: () => void): () => void {
  if (signal === undefined) return () => {};
  if (signal.aborted) {
    stop();
    return () => {};
  }
  signal.addEventListener('abort', stop, { once: true });
  return () => signal.removeEventListener('abort', stop);
}

export async function sendOnce(
  target: NotifyTarget,
  event: CloudEvent,
  context: SendContext,
): Promise<AttemptResult> {
  switch (target.type) {
    case 'webhook': {
      const url = await secretOr(target.url, context.secrets);
      const key = await context.secrets.lookup(target.signingSecret.secret);
      if (url === undefined || key === undefined) return missingSecret(target, context.secrets);
      const body = JSON.stringify(event);
      const timestamp = String(Math.floor(context.now() / 1000));
      return post(url, body, context, {
        'content-type': 'application/cloudevents+json',
        [timestampHeader]: timestamp,
        [signatureHeader]: signatureOf(key, timestamp, body),
        [eventIdHeader]: event.id,
      });
    }
    case 'slack': {
      const url = await secretOr(target.url, context.secrets);
      if (url === undefined) return missingSecret(target, context.secrets);
      return post(url, JSON.stringify(slackMessage(event)), context, {
        'content-type': 'application/json',
      });
    }
    case 'command':
      return runCommand(target.command, JSON.stringify(event), context);
    default: {
      const unknown: never = target;
      return unknown;
    }
  }
}

/** A Slack-compatible incoming webhook's message: `text` for notifications, one section block. */
export function slackMessage(event: CloudEvent): { text: string; blocks: unknown[] } {
  const mark =
    event.data.severity === 'error'
      ? ':x:'
      : event.data.severity === 'warning'
        ? ':warning:'
        : ':information_source:';
  const text = `${mark} cutover ${event.data.environment}: ${event.data.message}`;
  return { text, blocks: [{ type: 'section', text: { type: 'mrkdwn', text } }] };
}

async function secretOr(url: NotifyUrl, secrets: SecretSource): Promise<string | undefined> {
  return typeof url === 'string' ? url : secrets.lookup(url.secret);
}

function missingSecret(target: NotifyTarget, secrets: SecretSource): AttemptResult {
  const names = [
    ...(target.type !== 'command' && typeof target.url !== 'string' ? [target.url.secret] : []),
    ...(target.type === 'webhook' ? [target.signingSecret.secret] : []),
  ];
  const where = names.map((n) => `${n} (looked for ${secrets.lookedIn(n)})`).join(', ');
  return {
    ok: false,
    retryable: false,
    error: `a secret is not set: ${where}; set it where the migration runs`,
  };
}

/**
 * One attempt, ended by the first `done`: the one `start` calls, or at `context.timeoutMs` (a
 * retryable failure saying `late`) or when the delivery is abandoned, both after `start`'s cancel
 * (returned) has stopped what it started. The whole attempt, answer included, is bounded: a
 * receiver that accepts and never answers costs one timeout, never more.
 */
function boundedAttempt(
  context: SendContext,
  late: string,
  start: (done: (result: AttemptResult) => void) => () => void,
): Promise<AttemptResult> {
  return new Promise((resolve) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let forget = () => {};
    const done = (result: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      forget();
      resolve(result);
    };
    const cancel = start(done);
    if (settled) return;
    timer = setTimeout(() => {
      cancel();
      done({ ok: false, retryable: true, error: late });
    }, context.timeoutMs);
    timer.unref(); // what the attempt started keeps the process up while it runs; the timer must not
    forget = onAbandon(context.abandon, () => {
      cancel();
      done(abandonedAttempt);
    });
  });
}

/** A 2xx is delivered; 408, 429 and 5xx are worth another attempt, other statuses are not. */
function post(
  url: string,
  body: string,
  context: SendContext,
  headers: Record<string, string>,
): Promise<AttemptResult> {
  return boundedAttempt(context, `no answer within ${context.timeoutMs} ms`, (done) => {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      done({ ok: false, retryable: false, error: 'the URL does not parse' });
      return () => {};
    }
    // node:https (TLS) loaded only for an https URL: ~18 ms of CPU in every runner otherwise.
    const client = target.protocol === 'https:' ? process.getBuiltinModule('node:https') : http;
    const request = client.request(
      target,
      { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
      (response) => {
        const status = response.statusCode ?? 0;
        response.resume();
        response.on('end', () => {
          if (status >= 200 && status < 300) done({ ok: true, status });
          else
            done({
              ok: false,
              status,
              retryable: status === 408 || status === 429 || status >= 500,
              error: `answered ${status}`,
            });
        });
        response.on('error', (error) => done({ ok: false, retryable: true, error: error.message }));
      },
    );
    request.on('error', (error: NodeJS.ErrnoException) =>
      done({
        ok: false,
        retryable: true,
        error: error.code ? `${error.code} (${error.message})` : error.message,
      }),
    );
    request.end(body);
    return () => request.destroy();
  });
}

/** Exit 0 is delivered; the command gets the event on stdin and is killed (its group) at the timeout. */
function runCommand(argv: string[], input: string, context: SendContext): Promise<AttemptResult> {
  const [program, ...args] = argv as [string, ...string[]];
  const file = program.includes('/') ? path.resolve(context.baseDir, program) : program;
  return boundedAttempt(context, `${program} did not exit within ${context.timeoutMs} ms`, (done) => {
    let stderr = '';
    const child = spawn(file, args, {
      cwd: context.baseDir,
      env: inheritedEnv(),
      stdio: ['pipe', 'ignore', 'pipe'],
      detached: true,
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      if (stderr.length < 500) stderr += chunk.toString('utf8');
    });
    child.stdin?.on('error', () => {}); // a command that does not read its stdin
    child.stdin?.end(input);
    child.on('error', (error: NodeJS.ErrnoException) =>
      done({
        ok: false,
        retryable: false,
        error: `${file} could not be started (${error.code ?? error.message})`,
      }),
    );
    child.on('close', (code, signal) => {
      if (code === 0) done({ ok: true });
      else {
        const last = stderr.trim().split('\n').at(-1) ?? '';
        done({
          ok: false,
          retryable: true,
          error: `${program} exited ${code ?? signal}${last ? `: ${last}` : ''}`,
        });
      }
    });
    // The command runs in its own process group (detached): only killing that group ends it, so an
    // abandoned delivery must do so itself, as the process exiting would leave it running.
    return () => killGroup(child.pid);
  });
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
