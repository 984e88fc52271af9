/**
 * A stream that stops following a migration whose log is quiet lets go of it at once, though other
 * streams keep the shared reader alive: nothing of it waits for the log's next line (on a quiet
 * bake, many streams opened and closed would pile up until then). A pure unit test of LogStreams
 * over a log that has one line and then waits, with the garbage collector as the witness.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect, it } from 'vitest';
import type { LogLine } from '../../core/migration/types.js';
import type { MigrationService } from '../../engine/services/migration-service.js';
import { defaultLogStreamLimits, LogStreams } from '../../server/log-streams.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** A migration in a long bake: one line written, then nothing until the reader is stopped. */
const quietService = {
  async *logs(_id: string, options: { follow: boolean; signal?: AbortSignal }): AsyncGenerator<LogLine> {
    yield { at: 0, level: 'info', kind: 'driver', message: 'baking' } as LogLine;
    const signal = options.signal as AbortSignal;
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  },
} as unknown as MigrationService;

/** Follows until the first line, then stops; returns a weak hold on what the stream used. */
async function followAndStop(streams: LogStreams): Promise<WeakRef<AbortSignal>> {
  const stopper = new AbortController();
  const lines = streams.follow('mig_quiet', stopper.signal);
  expect((await lines.next()).done).toBe(false);
  const waiting = lines.next(); // waits for a line that does not come
  await new Promise((resolve) => setImmediate(resolve));
  stopper.abort();
  expect(await waiting).toEqual({ done: true, value: null });
  return new WeakRef(stopper.signal);
}

it('a stream that stops on a quiet log is let go while other streams follow it', async () => {
  const streams = new LogStreams(quietService, defaultLogStreamLimits);
  const stayer = new AbortController();
  const stays = streams.follow('mig_quiet', stayer.signal);
  expect((await stays.next()).done).toBe(false);
  const stillWaiting = stays.next();

  const gone: WeakRef<AbortSignal>[] = [];
  for (let i = 0; i < 20; i++) gone.push(await followAndStop(streams));
  expect(streams.readers).toBe(1);
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  expect(gone.filter((ref) => ref.deref() !== undefined)).toHaveLength(0);

  stayer.abort();
  expect(await stillWaiting).toEqual({ done: true, value: null });
  expect(streams.readers).toBe(0);
});
