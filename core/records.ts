/**
 * Topology records are keyed by user-chosen names, so a name like `constructor` or `__proto__` must
 * never reach Object.prototype: look entries up and write them through these helpers only.
 */
export function own<T>(record: Readonly<Record<string, T>> | undefined, key: string): T | undefined {
  return record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined;
}

export function has(record: Readonly<Record<string, unknown>> | undefined, key: string): boolean {
  return record !== undefined && Object.hasOwn(record, key);
}

/** Sets an own, enumerable property, even for the key `__proto__`. */
export function setOwn<T>(record: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') {
    Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    record[key] = value;
  }
}
