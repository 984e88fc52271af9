import { createHash } from 'node:crypto';
import { setOwn } from '../records.js';

/** JSON with object keys sorted at every depth: equal data, equal bytes. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) setOwn(sorted, k, (v as Record<string, unknown>)[k]);
    return sorted;
  });
}

export function sha256Digest(text: string): string {
  return `sha256:${createHash('sha256').update(text).digest('hex')}`;
}
