import { InvariantError } from '../errors.js';
import { setOwn } from '../records.js';
import { parseDuration } from './duration.js';
import type { EnvValue } from './env-value.js';
import {
  type Hook,
  type HookFile,
  type HookPoint,
  type Hooks,
  type HooksFile,
  hookDefaults,
  hookPoints,
} from './hook-types.js';

/**
 * `strategy.hooks` of a checked file → the model: defaults applied, durations in milliseconds, keys
 * inserted in sorted order (the model's invariant, see normalize.ts). Undefined when the file has
 * no hook at all, so topologies without hooks keep their models, digests and plan ids.
 */
export function normalizeHooks(file: HooksFile | undefined): Hooks | undefined {
  if (!file) return undefined;
  const out: Hooks = {};
  let any = false;
  for (const point of [...hookPoints].sort() as HookPoint[]) {
    const list = file[point];
    if (!list || list.length === 0) continue;
    out[point] = list.map(normalizeHook);
    any = true;
  }
  return any ? out : undefined;
}

function normalizeHook(h: HookFile): Hook {
  const base = {
    name: h.name,
    retries: h.retries ?? hookDefaults.retries,
    retryDelay: duration(h.retryDelay, hookDefaults.retryDelayMs),
    timeout: duration(h.timeout, hookDefaults.timeoutMs),
  };
  if (h.http) {
    const http = {} as Extract<Hook, { http: unknown }>['http'];
    if (h.http.headers) http.headers = sortedEnv(h.http.headers);
    if (h.http.signingSecret) http.signingSecret = { secret: h.http.signingSecret.secret };
    http.url = typeof h.http.url === 'string' ? h.http.url : { secret: h.http.url.secret };
    return { http, ...base };
  }
  if (!h.command) throw new InvariantError(`hook ${h.name} without http or command passed the checks`);
  const command = [...h.command];
  return h.env ? { command, env: sortedEnv(h.env), ...base } : { command, ...base };
}

/** A copy in sorted key order; a secret reference becomes a fresh `{ secret }`. */
function sortedEnv(env: Record<string, EnvValue>): Record<string, EnvValue> {
  const out: Record<string, EnvValue> = {};
  for (const key of Object.keys(env).sort()) {
    const value = env[key] as EnvValue;
    setOwn(out, key, typeof value === 'string' ? value : { secret: value.secret });
  }
  return out;
}

function duration(text: string | undefined, fallbackMs: number): number {
  if (text === undefined) return fallbackMs;
  const ms = parseDuration(text);
  if (ms === undefined) throw new InvariantError(`duration "${text}" passed the schema but does not parse`);
  return ms;
}
