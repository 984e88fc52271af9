/** Durations are written as `500ms`, `30s`, `2m`, `1h`, `1m30s` and kept as milliseconds. */
const unitMs = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
const durationPattern = /^(?:\d+(?:ms|s|m|h))+$/;
const partPattern = /(\d+)(ms|s|m|h)/g;

export type DurationMs = number;

/** Parses a duration; returns undefined for text that is not one. */
export function parseDuration(text: string): DurationMs | undefined {
  // The common spellings (`30s`, `500ms`, `2m`: up to 9 digits and one unit) without a regular
  // expression; anything else takes the general path below.
  if (typeof text === 'string') {
    let i = 0;
    let n = 0;
    for (let c = text.charCodeAt(0); c >= 48 && c <= 57 && i < 10; c = text.charCodeAt(++i))
      n = n * 10 + (c - 48);
    if (i >= 1 && i <= 9) {
      const rest = text.length - i;
      const u = text.charCodeAt(i);
      if (rest === 1 && u === 115 /* s */) return n * 1000;
      if (rest === 1 && u === 109 /* m */) return n * 60_000;
      if (rest === 1 && u === 104 /* h */) return n * 3_600_000;
      if (rest === 2 && u === 109 && text.charCodeAt(i + 1) === 115) return n;
    }
  }
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
