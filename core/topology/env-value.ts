/** How every view, plan and message shows a secret's value: never the value itself. */
export const sensitiveText = '(sensitive)';

/** An `env` value: the value itself, or a reference to a secret read where the migration runs. */
export type EnvValue = string | SecretRef;

/**
 * A component's `env` value: an EnvValue, or the address of a component it depends on
 * (dependency-refs.ts). Only components have dependencies: hooks' `env` stays an EnvValue.
 */
export type ComponentEnvValue = EnvValue | DependencyRef;

/**
 * A secret by name. Invariant: the model holds only the name, never the value, so topologies,
 * plans, journals and layouts (all built from the model) cannot carry a secret's value.
 */
export interface SecretRef {
  secret: string;
}

/**
 * The address of a component this one `dependsOn`, in the slot of the same generation (green gets
 * its dependencies' green slots where they are replaced too), written into `format`: `{host}`,
 * `{port}` and `{address}` (host:port) of its first replica, `{addresses}` (all of them, comma
 * separated). The model holds the format (default `{address}`), never an address: addresses are
 * known only when the migration runs.
 */
export interface DependencyRef {
  format: string;
  ref: string;
}
