/** How every view, plan and message shows a secret's value: never the value itself. */
export const sensitiveText = '(sensitive)';

/** An `env` value: the value itself, or a reference to a secret read where the migration runs. */
export type EnvValue = string | SecretRef;

/**
 * A secret by name. Invariant: the model holds only the name, never the value, so topologies,
 * plans, journals and layouts (all built from the model) cannot carry a secret's value.
 */
export interface SecretRef {
  secret: string;
}
