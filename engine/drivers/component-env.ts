import { isDependencyRef, resolveReferences } from '../../core/topology/dependency-refs.js';
import { isSecretRef } from '../../core/topology/secret-refs.js';
import { type ComponentCallContext, PermanentDriverError } from './types.js';

/**
 * The component's `env` as its processes and scripts get it: the values the runner read for its
 * secrets and its dependencies' addresses (`ctx.env`), or, for a call made without them, the plain
 * values and the references `ctx.dependencies` can give, refusing a secret or a reference it cannot.
 */
export function componentEnv(ctx: ComponentCallContext): Record<string, string> {
  if (ctx.env) return ctx.env;
  const refs = resolveReferences(ctx.component, ctx.spec, ctx.dependencies ?? {});
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(ctx.spec.env)) {
    if (isSecretRef(value)) {
      throw new PermanentDriverError(
        `secret ${value.secret} (env.${key} of component ${ctx.component}) is not set where this runs: set $CUTOVER_SECRET_${value.secret} or a line ${value.secret}=… in the secrets file ($CUTOVER_SECRETS_FILE)`,
      );
    }
    if (isDependencyRef(value)) continue;
    env[key] = value;
  }
  const [unresolved] = refs.unresolved;
  if (unresolved !== undefined) throw new PermanentDriverError(unresolved);
  return { ...env, ...refs.env };
}
