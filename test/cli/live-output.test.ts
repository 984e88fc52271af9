import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { liveOutput } from '../../cli/live-output.js';
import type { LogLine } from '../../core/migration/types.js';
import { plainStyle } from '../../views/style.js';
import { Driver, holdSpec } from '../support/migration-builders.js';

/** A terminal as the command sees it: what was written, and the size it reports. */
function terminal(size: { isTTY?: boolean; columns?: number; rows?: number }) {
  let written = '';
  const stream = Object.assign(
    new Writable({
      write(chunk, _encoding, done) {
        written += chunk.toString();
        done();
      },
    }),
    size,
  );
  return { stream, written: () => written };
}

/** A migration run to its end, and its log as `migrate` receives it: each line with the state after it. */
function run(): { lines: LogLine[]; driver: Driver } {
  const driver = new Driver(holdSpec([10, 50, 100]));
  driver.run();
  const lines = driver.notices.map((n, i) => ({
    at: 1_000 + i,
    level: n.level,
    kind: n.kind,
    message: n.message,
  }));
  return { lines, driver };
}

describe('the live view of migrate', () => {
  it('on a terminal with no size, prints plain lines: every log line, no escape code', async () => {
    for (const size of [{ columns: 0, rows: 0 }, {}]) {
      const t = terminal({ isTTY: true, ...size });
      const out = await liveOutput(t.stream, plainStyle);
      const { lines, driver } = run();
      for (const line of lines) out.line(line, driver.state);
      out.done();
      expect(t.written()).not.toContain('\u001b');
      for (const line of lines) expect(t.written()).toContain(line.message);
      expect(t.written().split('\n').length).toBe(lines.length + 1);
    }
  });

  it('on a sized terminal, keeps the whole history above the live part (each line printed once)', async () => {
    const t = terminal({ isTTY: true, columns: 120, rows: 30 });
    const out = await liveOutput(t.stream, plainStyle);
    const { lines, driver } = run();
    expect(lines.length).toBeGreaterThan(12); // more than the old view's last 6 kept
    for (const line of lines) out.line(line, driver.state);
    out.done();
    // log-update erases only its own part: a line written once above it stays in the scrollback.
    for (const line of lines) {
      const count = t.written().split(line.message).length - 1;
      expect({ message: line.message, count }).toEqual({ message: line.message, count: 1 });
    }
    expect(t.written()).toContain('mig_test  shop  completed');
  });
});
