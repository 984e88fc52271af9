/**
 * Where `migrate` prints a migration as it runs. On a terminal with a size: each log line printed
 * once, above a live part redrawn in place (the stages and what runs now), so the history stays in
 * the terminal's scrollback. Off a terminal, or on one that reports no size (columns or rows 0 or
 * unknown, as some CI and container terminals do; log-update would draw nothing but escape codes
 * there): plain lines, one per log line.
 */
import type { LogLine, MigrationState } from '../core/migration/types.js';
import { renderLiveView, renderLogLine } from '../views/render-migration.js';
import type { Style } from '../views/style.js';
import type { OutputStream } from './context.js';

export interface LiveOutput {
  /** A line of the migration's log, with the state after it when known. */
  line(line: LogLine, state: MigrationState | undefined): void;
  /** Leaves what is drawn in place (before other output, and at the end). */
  done(): void;
}

/** Whether the stream is a terminal that says how large it is. */
export function hasTerminalSize(stream: OutputStream): boolean {
  return stream.isTTY === true && (stream.columns ?? 0) > 0 && (stream.rows ?? 0) > 0;
}

export async function liveOutput(stream: OutputStream, style: Style): Promise<LiveOutput> {
  const plain: LiveOutput = {
    line: (line) => stream.write(`${renderLogLine(line, style)}\n`),
    done: () => {},
  };
  if (!hasTerminalSize(stream)) return plain;
  // Loaded only here: the plain path, and every other command, never pay for it.
  const { createLogUpdate } = await import('log-update');
  const update = createLogUpdate(stream as NodeJS.WriteStream);
  let drawn = false;
  return {
    line(line, state) {
      // The line goes above the live part, once: clear the live part, print it, draw it again.
      if (drawn) update.clear();
      stream.write(`${renderLogLine(line, style)}\n`);
      if (state) {
        update(renderLiveView(state, [], style));
        drawn = true;
      } else drawn = false;
    },
    done() {
      if (drawn) update.done();
      drawn = false;
    },
  };
}
