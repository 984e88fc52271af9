import { isSecretRef } from '../../core/topology/secret-refs.js';
import { type ComponentCallContext, PermanentDriverError } from './types.js';

/**
 * The component's `env` as its processes and scripts get it: the values the runner read for its
 * secrets (`ctx.env`), or, for a call made without them, the plain values, refusing a reference.
 */
export function componentEnv(ctx: ComponentCallContext): Record<string, string> {
  if (ctx.env) return ctx.env;
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(ctx.spec.env)) {
    if (isSecretRef(value)) {
      throw new PermanentDriverError(
        `secret ${value.secret} (env.${key} of component ${ctx.component}) is not set where this runs: set $CUTOVER_SECRET_${value.secret} or a line ${value.secret}=… in the secrets file ($CUTOVER_SECRETS_FILE)`,
      );
    }
    env[key] = value;
  }
  return env;
}
