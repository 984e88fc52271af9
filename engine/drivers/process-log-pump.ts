/**
 * The log pump of one process replica, a program of its own (process-start.ts starts it beside the
 * replica, in the replica's process group): it reads what the replica prints (its stdin, the read
 * end of the replica's stdout and stderr), masks the secret values the replica was given and the
 * credential shapes (core/redact.ts), and appends the lines to the replica's log (its stdout, the
 * log file opened by cutover in append mode).
 *
 * The values come over fd 3, a socket to the cutover process that starts it, as one JSON line
 * (`{"values":[…]}`), never in its argv or environment; it answers `ready` there once it masks.
 * Until then it writes nothing; a socket that ends without them means nothing it reads is written.
 *
 * It must not fail the replica: it ignores SIGTERM, SIGINT and SIGHUP (a stop signals the whole
 * group; the pump ends when the replica's output does, after writing its last lines), keeps reading
 * when the log cannot be written (the lines lost are counted and said once it can), and exits only
 * at the end of its input. Bytes are handled as latin1, so the log holds exactly what the replica
 * printed but the masked parts.
 */
import { unlink, writeSync } from 'node:fs';
import { Socket } from 'node:net';
import { type Redactor, redactorOf } from '../../core/redact.js';

/** A line longer than this without a newline is written as it is (masked), not held longer. */
const maxHeldChars = 64 * 1024;
const logFd = 1;
const controlFd = 3;

/**
 * The pump's whole life: the replica's output in, masked lines out, until the output ends. `again`:
 * how many pumps before this one were stopped by a signal (its keeper starts it again).
 */
function runLogPump(fifo: string | undefined, again: number): void {
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

  function take(chunk: string): void {
    const text = held + chunk;
    const end = text.lastIndexOf('\n');
    if (end < 0 && text.length <= maxHeldChars) {
      held = text;
      return;
    }
    const cut = end < 0 ? text.length : end + 1;
    held = text.slice(cut);
    write((redact as Redactor).text(text.slice(0, cut)));
  }

  function finish(): void {
    if (held !== '') write((redact as Redactor).text(held));
    held = '';
    process.exit(0);
  }

  function start(): void {
    if (fifo) unlink(fifo, () => {}); // both ends are open: the path is not needed any more
    process.stdin.setEncoding('latin1');
    process.stdin.on('data', (chunk: string) => take(chunk));
    process.stdin.once('end', finish);
    process.stdin.once('error', finish);
  }

  const control = new Socket({ fd: controlFd, readable: true, writable: true });
  control.on('error', () => {
    // cutover went away (it may: the replica outlives it); nothing more to say to it
  });
  let settings = '';
  const onSettings = (data: Buffer) => {
    settings += data.toString('utf8');
    const newline = settings.indexOf('\n');
    if (newline < 0) return;
    control.off('data', onSettings);
    let values: string[];
    try {
      values = (JSON.parse(settings.slice(0, newline)) as { values: string[] }).values;
    } catch {
      withoutSettings();
      return;
    }
    // The replica's bytes are read as latin1: each value is matched as the bytes it prints as.
    redact = redactorOf(values.map((value) => Buffer.from(value, 'utf8').toString('latin1')));
    control.write('ready\n');
    start();
  };
  /** No values to mask: nothing read is written (it may be a secret), and the log says so. */
  function withoutSettings(): void {
    if (redact) return;
    control.off('data', onSettings);
    write(
      again > 0
        ? '--- cutover: the log pump was stopped by a signal and started again without the values to mask: the output from here on is not logged\n'
        : '--- cutover: the log pump got no values to mask: the output is not logged\n',
    );
    dropping = true;
    redact = redactorOf([]);
    start();
  }
  control.on('data', onSettings);
  control.once('end', withoutSettings);
}

runLogPump(process.argv[2], Number(process.argv[3] ?? 0));
