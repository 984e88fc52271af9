import { createHmac } from 'node:crypto';
import http from 'node:http';
import { environmentCause } from '../../core/errors.js';
import { formatDuration } from '../../core/topology/duration.js';
import type { HttpHook } from '../../core/topology/hook-types.js';
import { type AttemptOutcome, oneLine } from './attempt.js';

/** Of a refused answer's body, what a failure reason quotes. */
export const quotedBodyChars = 200;
/** Of an answer's body, what is kept at all (the rest is read and dropped). */
const keptBodyChars = 4_096;

export interface SignedPost {
  /** The hook's URL, its secret reference resolved. */
  url: string;
  body: string;
  headers: Record<string, string>;
  /** The HMAC-SHA256 key, when the hook signs. */
  signingKey?: string;
}

/**
 * The headers of a signed body, as notify webhooks have them: `X-Cutover-Timestamp` (Unix seconds)
 * and `X-Cutover-Signature: sha256=<hex of HMAC(key, timestamp + "." + body)>`, so a receiver can
 * check both where the body comes from and that it is not a replay.
 */
export function signatureHeaders(key: string, body: string, nowMs: number): Record<string, string> {
  const timestamp = String(Math.floor(nowMs / 1000));
  const digest = createHmac('sha256', key).update(`${timestamp}.${body}`).digest('hex');
  return { 'x-cutover-timestamp': timestamp, 'x-cutover-signature': `sha256=${digest}` };
}

/**
 * One POST of a hook: any 2xx passes; another status, no connection or no whole answer within the
 * hook's timeout fails and may be retried. With `node:http`, not `fetch` (see platform/loopback-http.ts).
 * Settles at once when `signal` aborts, the request destroyed.
 */
export function postHook(hook: HttpHook, post: SignedPost, signal: AbortSignal): Promise<AttemptOutcome> {
  const url = new URL(post.url);
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(post.body),
    'user-agent': 'cutover-hook',
    'x-cutover-hook': hook.name,
    ...post.headers,
    ...(post.signingKey ? signatureHeaders(post.signingKey, post.body, Date.now()) : {}),
  };
  // node:https (TLS) loaded only for an https URL: ~18 ms of CPU in every runner otherwise.
  const client = url.protocol === 'https:' ? process.getBuiltinModule('node:https') : http;
  return new Promise((resolve) => {
    let timedOut = false;
    // Whichever comes first settles the attempt; a destroyed request may report more than once.
    const fail = (error: Error) => {
      clearTimeout(timer);
      if (signal.aborted) resolve({ ok: false, aborted: true });
      else if (timedOut)
        resolve({ ok: false, retry: true, what: `timed out after ${formatDuration(hook.timeout)}` });
      else resolve({ ok: false, retry: true, what: connectionFailure(error, url) });
    };
    const request = client.request(url, { method: 'POST', headers, agent: false, signal }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        if (body.length < keptBodyChars) body += chunk;
      });
      response.on('end', () => {
        clearTimeout(timer);
        const status = response.statusCode ?? 0;
        if (status >= 200 && status < 300) return resolve({ ok: true });
        const quoted = oneLine(body, quotedBodyChars);
        resolve({
          ok: false,
          retry: true,
          what: `answered ${status}`,
          ...(quoted ? { detail: `: ${quoted}` } : {}),
        });
      });
      response.on('error', fail);
    });
    // A deadline for the whole exchange (connect, answer and body), not the socket's idle time.
    const timer = setTimeout(() => {
      timedOut = true;
      request.destroy(new Error('hook timeout'));
    }, hook.timeout);
    request.on('error', fail);
    request.end(post.body);
  });
}

/** Why no answer came, and what to do: never an internal error for a receiver that is down. */
function connectionFailure(error: Error, url: URL): string {
  const code = (error as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ECONNREFUSED':
      return `could not connect: nothing listens at ${url.host} (ECONNREFUSED); start the receiver or correct the hook's url`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `could not resolve ${url.hostname} (${code}); correct the hook's url or check DNS`;
    case 'ECONNRESET':
    case 'EPIPE':
      return `lost the connection before an answer (${code}); check the receiver's log`;
    default:
      return `could not be reached: ${environmentCause(error) ?? error.message}`;
  }
}
