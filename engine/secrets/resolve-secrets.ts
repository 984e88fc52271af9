import { CutoverError } from '../../core/errors.js';
import type { SecretDigests } from '../../core/plan/secret-changes.js';
import { secretRefsOf } from '../../core/topology/secret-refs.js';
import type { Component, Topology } from '../../core/topology/types.js';
import type { StateDir } from '../store/state-dir.js';
import { type SecretHasher, secretHasher } from './secret-key.js';
import { type SecretSource, secretEnvPrefix, secretsFileEnv } from './secret-source.js';

export interface ResolvedEnv {
  /** The component's plain `env` values and its secrets' values (references to a dependency: not here). */
  env: Record<string, string>;
  /** Keyed hashes of the secrets given, by `env` key; absent when the component uses none. */
  digests?: Record<string, string>;
  /** With `missing: 'omit'`: the secrets set nowhere, left out of `env`. */
  omitted?: string[];
}

export interface ResolveOptions {
  /** Given: the digests of the values are returned too (for the record of a slot). */
  hasher?: () => Promise<SecretHasher>;
  /** 'fail' (default): a secret set nowhere is an error. 'omit': it is left out and named. */
  missing?: 'fail' | 'omit';
}

/**
 * The component's `env` with its secrets read from `source`, at apply time and in the process that
 * applies. A secret set nowhere is an error naming it and where it was looked for (USAGE), never
 * a value.
 */
export async function resolveComponentEnv(
  component: string,
  spec: Pick<Component, 'env'>,
  source: SecretSource,
  options: ResolveOptions = {},
): Promise<ResolvedEnv> {
  const env: Record<string, string> = {};
  const refs = secretRefsOf(spec);
  // A reference to a dependency is resolved from the slots (dependency-refs.ts), not here.
  for (const [key, value] of Object.entries(spec.env)) if (typeof value === 'string') env[key] = value;
  if (refs.length === 0) return { env };
  const hash = options.hasher ? await options.hasher() : undefined;
  const digests: Record<string, string> = {};
  const omitted: string[] = [];
  for (const { key, secret } of refs) {
    const value = await source.lookup(secret);
    if (value === undefined && options.missing === 'omit') {
      omitted.push(secret);
      continue;
    }
    if (value === undefined) {
      throw new CutoverError(
        'USAGE',
        `secret ${secret} (env.${key} of component ${component}) is not set: looked for ${source.lookedIn(secret)}; set it where the migration runs`,
      );
    }
    env[key] = value;
    if (hash) digests[key] = hash(value);
  }
  const resolved: ResolvedEnv = hash ? { env, digests } : { env };
  if (omitted.length > 0) resolved.omitted = omitted;
  return resolved;
}

/**
 * Digests of the values now of every secret the topology references and this process can read,
 * by secret name: what the plan compares with the digests recorded at provision. A secret set
 * nowhere here is left out (the plan then cannot tell whether it changed, and says nothing); a
 * topology without secrets needs no key, so none is made for it.
 */
export async function secretDigestsFor(
  topology: Topology,
  stateDir: StateDir,
  source: SecretSource,
): Promise<SecretDigests | undefined> {
  const names = new Set<string>();
  for (const component of Object.values(topology.components)) {
    for (const { secret } of secretRefsOf(component)) names.add(secret);
  }
  if (names.size === 0) return undefined;
  const hash = await secretHasher(stateDir);
  const digests: Record<string, string> = {};
  for (const name of [...names].sort()) {
    const value = await source.lookup(name);
    if (value !== undefined) digests[name] = hash(value);
  }
  return digests;
}

/**
 * What a plan made in this process compares: the digests of the secrets as this process reads them
 * (its environment and secrets file), hashed with the state directory's key.
 */
export function planSecrets(
  topology: Topology,
  stateDir: StateDir,
  source: SecretSource,
): Promise<SecretDigests | undefined> {
  return secretDigestsFor(topology, stateDir, source);
}

/** cutover's own credentials (a server's tokens, a client's token, the Git webhook key): no child needs them. */
const cutoverCredentials: ReadonlySet<string> = new Set([
  'CUTOVER_TOKENS',
  'CUTOVER_TOKEN',
  'CUTOVER_HOOK_SECRET',
]);

/**
 * cutover's own environment as a child process inherits it (a replica, a script, a hook, a probe,
 * the router, nginx): without the secrets meant for
 * cutover (`CUTOVER_SECRET_*`, the secrets file's path) and its credentials, so that one component
 * gets only the secrets its own `env` names and a process that needs none holds none.
 */
export function inheritedEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith(secretEnvPrefix) || key === secretsFileEnv || cutoverCredentials.has(key)) continue;
    out[key] = value;
  }
  return out;
}
