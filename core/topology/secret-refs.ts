import type { Component, ComponentEnvValue, SecretRef } from './types.js';

export { sensitiveText } from './env-value.js';

export function isSecretRef(value: ComponentEnvValue | undefined): value is SecretRef {
  return typeof value === 'object' && value !== null && 'secret' in value;
}

/** The component's `env` keys that reference a secret, with the secret's name, in key order. */
export function secretRefsOf(component: Pick<Component, 'env'>): Array<{ key: string; secret: string }> {
  const refs: Array<{ key: string; secret: string }> = [];
  for (const [key, value] of Object.entries(component.env)) {
    if (isSecretRef(value)) refs.push({ key, secret: value.secret });
  }
  return refs;
}
