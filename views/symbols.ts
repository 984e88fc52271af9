import { assertNever } from '../core/errors.js';
import { readableValue } from '../core/plan/diff-values.js';
import type { Change, ResourceChangeKind } from '../core/plan/types.js';
import { sensitiveText } from '../core/topology/secret-refs.js';
import type { Style } from './style.js';

/** Terraform's symbols: + add, ~ update in place (a restart too), -/+ replace (green-blue), - remove. */
export function changeSymbol(kind: ResourceChangeKind): string {
  switch (kind) {
    case 'add':
      return '+';
    case 'update':
    case 'restart':
      return '~';
    case 'replace':
      return '-/+';
    case 'remove':
      return '-';
    default:
      return assertNever(kind, 'resource change');
  }
}

export function changeColor(kind: ResourceChangeKind, style: Style): (text: string) => string {
  switch (kind) {
    case 'add':
      return style.green;
    case 'update':
    case 'restart':
    case 'replace':
      return style.yellow;
    case 'remove':
      return style.red;
    default:
      return assertNever(kind, 'resource change');
  }
}

export function changeVerb(kind: ResourceChangeKind): string {
  switch (kind) {
    case 'add':
      return 'will be added';
    case 'update':
      return 'will be updated';
    case 'replace':
      return 'will be replaced green-blue';
    case 'restart':
      return 'will be restarted in place';
    case 'remove':
      return 'will be removed';
    default:
      return assertNever(kind, 'resource change');
  }
}

export function formatValue(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? 'null');
}

/**
 * One side of a change: a secret's side as the bare word `(sensitive)`, a reference to a dependency
 * as `ref db as "postgres://app@{host}:{port}/app"`, a route's holds as its steps are written
 * (`20 % for 30s (analysis: success ≥ 99 %)`), anything else as formatValue.
 */
export function formatChangeValue(change: Change, value: unknown): string {
  if (change.sensitive && value === sensitiveText) return sensitiveText;
  return readableValue(change.path, value) ?? formatValue(value);
}

export function countsLine(
  summary: { add: number; change: number; remove: number },
  actions: number,
): string {
  return `Plan: ${summary.add} to add, ${summary.change} to change, ${summary.remove} to remove; ${actions} action${actions === 1 ? '' : 's'}.`;
}
