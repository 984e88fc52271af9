import { own } from '../records.js';
import { describeReference } from '../topology/dependency-refs.js';
import { formatDuration } from '../topology/duration.js';
import type { DependencyRef, StepHold } from '../topology/types.js';
import { describeHolds } from './describe-actions.js';
import type { Change } from './types.js';

/** Leaf keys whose numbers are durations in milliseconds; changes show them as `30s`, `1m30s`. */
const durationKeys: ReadonlySet<string> = new Set([
  'interval',
  'timeout',
  'deadline',
  'maxLag',
  'stopTimeout',
  'bake',
  'upstreamTimeout',
  'bodyTimeout',
  'queueTimeout',
  'maxAge',
]);

/**
 * Field-level differences between two JSON-like values. Objects recurse key by key in sorted order;
 * arrays and scalars compare as a whole (a command's argument list is one value to a reviewer).
 */
export function diffValues(before: unknown, after: unknown, prefix = ''): Change[] {
  const out: Change[] = [];
  walk(before, after, prefix, out);
  return out;
}

function walk(before: unknown, after: unknown, path: string, out: Change[]): void {
  if (isRecord(before) && isRecord(after)) {
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    for (const key of [...keys].sort()) {
      walk(own(before, key), own(after, key), path ? `${path}.${key}` : key, out);
    }
    return;
  }
  if (deepEqual(before, after)) return;
  const change: Change = { path };
  if (before !== undefined) change.before = present(path, before);
  if (after !== undefined) change.after = present(path, after);
  out.push(change);
}

function present(path: string, value: unknown): unknown {
  const leaf = path.slice(path.lastIndexOf('.') + 1);
  return typeof value === 'number' && durationKeys.has(leaf) ? formatDuration(value) : value;
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  const isArray = Array.isArray(a);
  if (isArray !== Array.isArray(b)) return false;
  // Plain loops, no closures: this runs on every component of both layouts.
  if (isArray) {
    const x = a as unknown[];
    const y = b as unknown[];
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (!deepEqual(x[i], y[i])) return false;
    return true;
  }
  // for…in rather than Object.keys: no array per object. Model objects are plain, with only own keys.
  let count = 0;
  for (const k in a as object) {
    if (!Object.hasOwn(b, k) || !deepEqual((a as never)[k], (b as never)[k])) return false;
    count++;
  }
  for (const _ in b as object) count--;
  return count === 0;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * `version 2.0.0 → 2.1.0`, `replicas 2 → 3`, `env.DEBUG added`, `health removed`, `env.DB_PASSWORD
 * changed (sensitive)`, `env.DATABASE_URL added (ref db as "{address}")`.
 */
export function describeChange(change: Change): string {
  if (change.sensitive) {
    if (change.before === undefined) return `${change.path} added (sensitive)`;
    if (change.after === undefined) return `${change.path} removed`;
    return `${change.path} changed (sensitive)`;
  }
  const holds = holdsOf(change.path, change.before) ?? holdsOf(change.path, change.after);
  if (holds !== undefined) {
    // Never cut: the steps as written are short, and a cut JSON array tells nobody anything.
    const side = (value: unknown) => holdsOf(change.path, value) ?? 'none';
    if (change.before === undefined) return `${change.path} added (${side(change.after)})`;
    if (change.after === undefined) return `${change.path} removed`;
    return `${change.path} ${side(change.before)} → ${side(change.after)}`;
  }
  const shown = (value: unknown) => short(envReference(change.path, value) ?? value);
  if (change.before === undefined) return `${change.path} added (${shown(change.after)})`;
  if (change.after === undefined) return `${change.path} removed`;
  return `${change.path} ${shown(change.before)} → ${shown(change.after)}`;
}

/**
 * A side of a change of a component's `env` that refers to a dependency, as people read it (`ref
 * db as "{address}"`); undefined for any other value.
 */
export function envReference(path: string, value: unknown): string | undefined {
  if (!path.startsWith('env.') || typeof value !== 'object' || value === null) return undefined;
  const ref = value as Partial<DependencyRef>;
  return typeof ref.ref === 'string' && typeof ref.format === 'string'
    ? describeReference(ref as DependencyRef)
    : undefined;
}

/**
 * A side of a change in the topology's own terms where the model's differs from the file's: a
 * reference to a dependency (envReference), a route's step holds (`20 % for 30s (analysis: …)`);
 * undefined for any other value, which reads as its JSON.
 */
export function readableValue(path: string, value: unknown): string | undefined {
  return envReference(path, value) ?? holdsOf(path, value);
}

/** A route's `holds` (`holds`, or `<route>.holds` in a shift of several routes) in words. */
function holdsOf(path: string, value: unknown): string | undefined {
  if (path !== 'holds' && !path.endsWith('.holds')) return undefined;
  if (path.startsWith('env.') || !Array.isArray(value)) return undefined;
  const steps = value as unknown[];
  const isHold = (s: unknown) =>
    typeof s === 'object' && s !== null && typeof (s as StepHold).weight === 'number' && 'hold' in s;
  return steps.every(isHold) ? describeHolds(steps as StepHold[]) : undefined;
}

export function short(value: unknown, max = 40): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
