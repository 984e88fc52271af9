/**
 * How one attempt of a hook ended. `what` completes "hook NAME (TARGET) …" ("answered 503", "timed
 * out after 30s"); `detail` follows the attempt count with its own separator (": <body>", "; last
 * lines: …"). `retry: false` ends the hook at once (a missing program, exit 2, a missing secret).
 */
export type AttemptOutcome =
  | { ok: true }
  | { ok: false; aborted: true }
  | { ok: false; aborted?: undefined; retry: boolean; what: string; detail?: string };

/** Text quoted from a receiver or a command, on one line: reasons are one line a person reads. */
export function oneLine(text: string, maxChars: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > maxChars ? `${flat.slice(0, maxChars)}…` : flat;
}
