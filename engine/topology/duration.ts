/** Durations are written as `500ms`, `30s`, `2m`, `1h`, `1m30s` and kept as milliseconds. */
const unitMs = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
const durationPattern = /^(?:\d+(?:ms|s|m|h))+$/;
const partPattern = /(\d+)(ms|s|m|h)/g;

export type DurationMs = number;

/** Parses a duration; returns undefined for text that is not one. */
export function parseDuration(text: string): DurationMs | undefined {
  // The common spellings (`30s`, `500ms`, `2m`) without a regular-expression scan.
  const simple = /^(\d{1,9})(ms|s|m|h)$/.exec(text);
  if (simple) return Number(simple[1]) * unitMs[simple[2] as keyof typeof unitMs];
  if (!durationPattern.test(text)) return undefined;
  let total = 0;
  for (const match of text.matchAll(partPattern)) {
    total += Number(match[1]) * unitMs[match[2] as keyof typeof unitMs];
  }
  return Number.isSafeInteger(total) ? total : undefined;
}

/** The canonical spelling: 90000 → `1m30s`, 1500 → `1s500ms`, 0 → `0s`. */
export function formatDuration(ms: DurationMs): string {
  if (ms === 0) return '0s';
  let rest = ms;
  let out = '';
  for (const [unit, size] of [
    ['h', unitMs.h],
    ['m', unitMs.m],
    ['s', unitMs.s],
    ['ms', unitMs.ms],
  ] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) {
      out += `${n}${unit}`;
      rest -= n * size;
    }
  }
  return out;
}
