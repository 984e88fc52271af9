import { own, setOwn } from '../records.js';
import type { Component, ComponentEnvValue, DependencyRef } from './types.js';

/** What a reference without `format` gives: the first replica's `host:port`. */
export const defaultRefFormat = '{address}';

/**
 * The placeholders of a reference's `format`. host, port and address are of the dependency's first
 * replica; addresses is every replica's `host:port`, comma separated, in the slot's order.
 */
export const refPlaceholders = ['host', 'port', 'address', 'addresses'] as const;
export type RefPlaceholder = (typeof refPlaceholders)[number];

/** `{name}`: a placeholder; any other brace is written as it is. */
const placeholderPattern = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

export function isDependencyRef(value: ComponentEnvValue | undefined): value is DependencyRef {
  return typeof value === 'object' && value !== null && 'ref' in value;
}

/** The component's `env` keys that reference a dependency, in key order. */
export function dependencyRefsOf(
  component: Pick<Component, 'env'>,
): Array<{ key: string; ref: string; format: string }> {
  const refs: Array<{ key: string; ref: string; format: string }> = [];
  for (const [key, value] of Object.entries(component.env)) {
    if (isDependencyRef(value)) refs.push({ key, ref: value.ref, format: value.format });
  }
  return refs;
}

/** The placeholders of `format` that are none of refPlaceholders, each once, in order. */
export function unknownPlaceholders(format: string): string[] {
  const unknown: string[] = [];
  for (const [, name] of format.matchAll(placeholderPattern)) {
    const known = (refPlaceholders as readonly string[]).includes(name as string);
    if (!known && !unknown.includes(name as string)) unknown.push(name as string);
  }
  return unknown;
}

/**
 * `format` with its placeholders replaced from the dependency's addresses (`host:port` each, as its
 * driver reported them; the host as written there, an IPv6 one in brackets, as URLs want it).
 * Null when there is no address to give.
 */
export function formatReference(format: string, addresses: readonly string[]): string | null {
  const first = addresses[0];
  if (first === undefined) return null;
  const sep = first.lastIndexOf(':');
  const values: Record<RefPlaceholder, string> = {
    host: sep === -1 ? first : first.slice(0, sep),
    port: sep === -1 ? '' : first.slice(sep + 1),
    address: first,
    addresses: addresses.join(','),
  };
  return format.replace(placeholderPattern, (text, name: string) => own(values, name) ?? text);
}

/**
 * A reference as plans and messages show it: `ref db as "postgres://app@{host}:{port}/app"` (not
 * with an arrow: a changed value reads `before → after`).
 */
export function describeReference(ref: DependencyRef): string {
  return `ref ${ref.ref} as ${JSON.stringify(ref.format)}`;
}

/** One dependency's slot as a call reaches it: which slot, and its replicas' addresses. */
export interface DependencySlot {
  slot: 'blue' | 'green';
  addresses: string[];
}

export interface ResolvedRefs {
  /** The `env` keys that reference a dependency, with their values. */
  env: Record<string, string>;
  /** Why a reference got no value (its dependency has no slot, or no address), one line each. */
  unresolved: string[];
}

/**
 * The values of the component's references, from the slots of its dependencies (dependency-slots.ts
 * in core/migration says which slot a call reaches). Pure: the same slots give the same values.
 */
export function resolveReferences(
  component: string,
  spec: Pick<Component, 'env'>,
  slots: Readonly<Record<string, DependencySlot>>,
): ResolvedRefs {
  const env: Record<string, string> = {};
  const unresolved: string[] = [];
  for (const { key, ref, format } of dependencyRefsOf(spec)) {
    const slot = own(slots, ref);
    const value = slot ? formatReference(format, slot.addresses) : null;
    if (value !== null) setOwn(env, key, value);
    else
      unresolved.push(
        slot
          ? `env.${key} of component ${component} refers to ${ref}, whose ${slot.slot} slot reports no address`
          : `env.${key} of component ${component} refers to ${ref}, which has no slot recorded`,
      );
  }
  return { env, unresolved };
}
