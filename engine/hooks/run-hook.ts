/**
 * The hook runner: one hook (HTTP or command) run to a verdict, with its timeout per attempt and
 * its retries. The migration's runner calls it at each hook point and decides what a failure means
 * (a rollback before the commit, a warning after it); this module decides nothing about the migration.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { formatDuration } from '../../core/topology/duration.js';
import type { EnvValue } from '../../core/topology/env-value.js';
import { describeHookTarget, type Hook, isHttpHook } from '../../core/topology/hook-types.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import type { SecretSource } from '../secrets/secret-source.js';
import type { AttemptOutcome } from './attempt.js';
import { runCommandHook } from './command-hook.js';
import { type HookContext, hookEnvironment, hookPayload } from './hook-context.js';
import { postHook } from './http-hook.js';

export interface RunHookOptions {
  /** Aborting stops the request, or the command's process group, at once; the result says so. */
  signal: AbortSignal;
  /** Lines for the migration log: each failed attempt, a command's stderr. */
  log: (line: string) => void;
  /** Where `{ secret: NAME }` of headers, the signing key and a command's env are read. */
  secrets: SecretSource;
  /** A command hook's working directory: the topology file's directory. */
  cwd: string;
  /** Records a command's process group, as for exec drivers (see DriverCallOptions.trackProcess). */
  trackProcess?: (pid: number) => () => void;
}

export type HookResult =
  | { ok: true; attempts: number; ms: number }
  /** `reason`: one line naming the hook, its target, what happened and, where useful, what to do. */
  | { ok: false; reason: string; attempts: number; ms: number; aborted?: true };

/** Never rejects: a receiver that is down, a missing program or a missing secret is a failed result. */
export async function runHook(
  hook: Hook,
  context: HookContext,
  options: RunHookOptions,
): Promise<HookResult> {
  const started = Date.now();
  const prefix = `hook ${hook.name} (${describeHookTarget(hook)})`;
  const ms = () => Date.now() - started;
  let secrets: Map<string, string>;
  try {
    secrets = await readSecrets(hook, options.secrets);
  } catch (error) {
    return { ok: false, reason: `${prefix}: ${(error as Error).message}`, attempts: 0, ms: ms() };
  }
  const maxAttempts = hook.retries + 1;
  for (let attempt = 1; ; attempt++) {
    const outcome = await attemptOnce(hook, attempt, context, secrets, options).catch(
      // What Node refuses before anything is sent: a header or env value with a control character.
      (error: Error): AttemptOutcome => ({
        ok: false,
        retry: false,
        what: `could not run: ${error.message}`,
      }),
    );
    if (outcome.ok) return { ok: true, attempts: attempt, ms: ms() };
    if (outcome.aborted) return aborted(prefix, attempt, ms());
    const tries = attempt > 1 ? ` after ${attempt} attempts` : '';
    const reason = `${prefix} ${outcome.what}${tries}${outcome.detail ?? ''}`;
    if (!outcome.retry || attempt >= maxAttempts) return { ok: false, reason, attempts: attempt, ms: ms() };
    options.log(
      `${prefix} ${outcome.what} (attempt ${attempt} of ${maxAttempts}); again in ${formatDuration(hook.retryDelay)}`,
    );
    try {
      await sleep(hook.retryDelay, undefined, { signal: options.signal });
    } catch {
      return aborted(prefix, attempt, ms());
    }
  }
}

function aborted(prefix: string, attempts: number, ms: number): HookResult {
  return {
    ok: false,
    reason: `${prefix} was stopped: the migration stopped waiting for it`,
    attempts,
    ms,
    aborted: true,
  };
}

async function attemptOnce(
  hook: Hook,
  attempt: number,
  context: HookContext,
  secrets: ReadonlyMap<string, string>,
  options: RunHookOptions,
): Promise<AttemptOutcome> {
  if (options.signal.aborted) return { ok: false, aborted: true };
  const payload = hookPayload(hook.name, attempt, context);
  if (isHttpHook(hook)) {
    const signingKey = hook.http.signingSecret ? secrets.get(hook.http.signingSecret.secret) : undefined;
    const { url } = hook.http;
    return postHook(
      hook,
      {
        url: typeof url === 'string' ? url : (secrets.get(url.secret) ?? ''),
        body: payload,
        headers: resolved(hook.http.headers ?? {}, secrets),
        ...(signingKey ? { signingKey } : {}),
      },
      options.signal,
    );
  }
  const env = {
    ...inheritedEnv(),
    ...resolved(hook.env ?? {}, secrets),
    ...hookEnvironment(hook.name, attempt, context),
  };
  return runCommandHook(
    hook,
    { cwd: options.cwd, env, stdin: payload },
    {
      signal: options.signal,
      log: options.log,
      ...(options.trackProcess ? { trackProcess: options.trackProcess } : {}),
    },
  );
}

/** Every secret the hook names, read once for all its attempts; one missing is an error naming it. */
async function readSecrets(hook: Hook, source: SecretSource): Promise<Map<string, string>> {
  const wanted: Array<{ secret: string; field: string }> = [];
  const refs = (record: Record<string, EnvValue>, field: string) => {
    for (const [key, value] of Object.entries(record)) {
      if (typeof value !== 'string') wanted.push({ secret: value.secret, field: `${field}.${key}` });
    }
  };
  if (isHttpHook(hook)) {
    if (typeof hook.http.url !== 'string') wanted.push({ secret: hook.http.url.secret, field: 'http.url' });
    refs(hook.http.headers ?? {}, 'http.headers');
    if (hook.http.signingSecret)
      wanted.push({ secret: hook.http.signingSecret.secret, field: 'http.signingSecret' });
  } else {
    refs(hook.env ?? {}, 'env');
  }
  const values = new Map<string, string>();
  for (const { secret, field } of wanted) {
    const value = await source.lookup(secret);
    if (value === undefined) {
      throw new Error(
        `secret ${secret} (${field}) is not set: looked for ${source.lookedIn(secret)}; set it where the migration runs`,
      );
    }
    values.set(secret, value);
  }
  return values;
}

function resolved(
  record: Record<string, EnvValue>,
  secrets: ReadonlyMap<string, string>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(record)) {
    out[key] = typeof value === 'string' ? value : (secrets.get(value.secret) ?? '');
  }
  return out;
}
