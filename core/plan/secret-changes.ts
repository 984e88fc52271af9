import { own } from '../records.js';
import { isSecretRef, sensitiveText } from '../topology/secret-refs.js';
import type { Component, ComponentEnvValue } from '../topology/types.js';
import { deepEqual } from './diff-values.js';
import type { Change } from './types.js';

/**
 * Keyed hashes (`hmac-sha256:<key id>:<hex>`) of the secrets' values now, by secret name: computed
 * by the engine before planning and passed in as data, so the plan stays pure and never sees a value.
 */
export type SecretDigests = Readonly<Record<string, string>>;

/**
 * The `env` changes of a component, with secrets kept sensitive. A reference shows as `(sensitive)`
 * on either side, never as `{secret: …}` fields; a reference whose value changed (the digest recorded
 * with the live slot at its provision differs from the digest now) is a change although the file is
 * the same. Digests made with different keys (another state directory) are not compared: unknown is
 * not a change. Plain string values, and references to a dependency, change as any field does.
 */
export function envChanges(
  old: Component,
  now: Component,
  recorded: Readonly<Record<string, string>> | undefined,
  digests: SecretDigests | undefined,
): Change[] {
  const keys = [...new Set([...Object.keys(old.env), ...Object.keys(now.env)])].sort();
  const changes: Change[] = [];
  for (const key of keys) {
    const path = `env.${key}`;
    const before = own(old.env, key);
    const after = own(now.env, key);
    if (!isSecretRef(before) && !isSecretRef(after)) {
      // A plain value, or a dependency's reference (`{ format, ref }`, shown as it is written).
      if (deepEqual(before, after)) continue;
      const change: Change = { path };
      if (before !== undefined) change.before = before;
      if (after !== undefined) change.after = after;
      changes.push(change);
      continue;
    }
    if (isSecretRef(before) && isSecretRef(after) && before.secret === after.secret) {
      const then = own(recorded ?? {}, key);
      const current = own(digests ?? {}, after.secret);
      if (then === undefined || current === undefined || !sameKey(then, current) || then === current)
        continue;
    }
    changes.push(sensitiveChange(path, before, after));
  }
  return changes;
}

/**
 * `changes` (a whole component's, in path order) with its `env.*` entries replaced by `env`, at the
 * place they sort to, so the order of a component's changes stays the order of its fields.
 */
export function spliceEnvChanges(changes: readonly Change[], env: readonly Change[]): Change[] {
  const others = changes.filter((c) => !isEnvPath(c.path));
  const at = others.findIndex((c) => topField(c.path) > 'env');
  const index = at === -1 ? others.length : at;
  return [...others.slice(0, index), ...env, ...others.slice(index)];
}

function sensitiveChange(
  path: string,
  before: ComponentEnvValue | undefined,
  after: ComponentEnvValue | undefined,
): Change {
  const change: Change = { path, sensitive: true };
  if (before !== undefined) change.before = isSecretRef(before) ? sensitiveText : before;
  if (after !== undefined) change.after = isSecretRef(after) ? sensitiveText : after;
  return change;
}

function isEnvPath(path: string): boolean {
  return path.startsWith('env.');
}

function topField(path: string): string {
  const dot = path.indexOf('.');
  return dot === -1 ? path : path.slice(0, dot);
}

/** `hmac-sha256:<key id>:<hex>`: two digests compare only when made with the same key. */
function sameKey(a: string, b: string): boolean {
  return a.slice(0, a.lastIndexOf(':')) === b.slice(0, b.lastIndexOf(':'));
}
