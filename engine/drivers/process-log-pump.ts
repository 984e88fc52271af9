/**
 * The log pump of one process replica, a program of its own (process-spawn.ts starts it beside the
 * replica): it reads what the replica prints (its stdin: the other end of the replica's stdout and
 * stderr), masks the secret values the replica was given and the credential shapes
 * (core/redact.ts), and appends the lines to the replica's log (its stdout: the log file, opened by
 * cutover in append mode).
 *
 * The values come first on stdin, written by cutover before the replica starts: one line
 * `{"values":[<base64>…]}`. They are never in its argv or environment. A first line that is not
 * that means nothing it reads is written (it may be a secret), and the log says so.
 *
 * It must not fail the replica, nor outlive it: it ignores SIGTERM, SIGINT and SIGHUP (it ends when
 * the replica's output does, after writing its last lines: whoever stops the replica waits for
 * it), keeps reading when the log cannot be written (the lines lost are counted and said once it
 * can), and exits at the end of its input. Bytes are handled as latin1, so the log holds exactly
 * what the replica printed but the masked parts.
 */
import { writeSync } from 'node:fs';
import { type Redactor, redactorOf } from '../../core/redact.js';

/** A line longer than this without a newline is written as it is (masked), not held longer. */
const maxHeldChars = 64 * 1024;
const logFd = 1;

function runLogPump(): void {
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => {});
  process.on('uncaughtException', (error) => write(`--- cutover: the log pump: ${error.message}\n`));

  let redact: Redactor | undefined;
  let dropping = false;
  let held = '';
  let lost = { lines: 0, why: '' };

  /** Writes `text` to the log; when it cannot, counts its lines as lost and says so at the next write that can. */
  function write(text: string): void {
    if (dropping || text === '') return;
    const note =
      lost.lines > 0 ? `--- cutover: ${lost.lines} lines of output were not logged (${lost.why})\n` : '';
    try {
      writeSync(logFd, note + text, null, 'latin1');
      lost = { lines: 0, why: '' };
    } catch (error) {
      lost = {
        lines: lost.lines + Math.max(1, text.split('\n').length - 1),
        why: (error as NodeJS.ErrnoException).code ?? (error as Error).message,
      };
    }
  }

  /** The values line; what follows it is the replica's. */
  function settle(text: string): string {
    const newline = text.indexOf('\n');
    if (newline < 0 && text.length <= maxHeldChars) {
      held = text;
      return '';
    }
    const line = newline < 0 ? text : text.slice(0, newline);
    let values: string[] | undefined;
    try {
      const parsed = JSON.parse(line) as { values?: unknown };
      if (Array.isArray(parsed.values) && parsed.values.every((v) => typeof v === 'string')) {
        // Base64 of the value's UTF-8 bytes, read back as latin1: matched as the bytes it prints as.
        values = parsed.values.map((v: string) => Buffer.from(v, 'base64').toString('latin1'));
      }
    } catch {
      // not the values line
    }
    if (values === undefined) {
      write('--- cutover: the log pump got no values to mask: the output is not logged\n');
      dropping = true;
    }
    redact = redactorOf(values ?? []);
    held = '';
    return newline < 0 ? '' : text.slice(newline + 1);
  }

  function take(chunk: string): void {
    const text = held + chunk;
    if (redact === undefined) {
      const rest = settle(text);
      if (redact === undefined || rest === '') return;
      take(rest);
      return;
    }
    const end = text.lastIndexOf('\n');
    if (end < 0 && text.length <= maxHeldChars) {
      held = text;
      return;
    }
    const cut = end < 0 ? text.length : end + 1;
    held = text.slice(cut);
    write(redact.text(text.slice(0, cut)));
  }

  function finish(): void {
    if (redact !== undefined && held !== '') write(redact.text(held));
    process.exit(0);
  }

  process.stdin.setEncoding('latin1');
  process.stdin.on('data', (chunk: string) => take(chunk));
  process.stdin.once('end', finish);
  process.stdin.once('error', finish);
}

runLogPump();
