import { pbkdf2 } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startReplica } from '../../../engine/drivers/process-start.js';

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/**
 * Keeps libuv's thread pool (4 threads) busy until stopped, as a loaded runner's file I/O does: every
 * file operation then waits its turn behind a hash.
 */
function busyThreadPool(): { stop: () => Promise<void> } {
  let running = true;
  const worker = async () => {
    while (running) await new Promise((resolve) => pbkdf2('x', 'salt', 100_000, 32, 'sha256', resolve));
  };
  const workers = Array.from({ length: 8 }, worker);
  return {
    stop: async () => {
      running = false;
      await Promise.all(workers);
    },
  };
}

describe('startReplica', () => {
  it('sees the exit of a replica that ends while the start is still closing its log file', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'cutover-start-'));
    dirs.push(dir);
    const busy = busyThreadPool();
    // The log file's close waits behind the busy pool; the shell exits meanwhile. Its 'exit' was
    // emitted before anyone listened, so `exited` never settled and a start-up check passed.
    const replica = await startReplica(
      {
        command: ['sh', '-c', 'exit 3'],
        cwd: dir,
        env: { PATH: process.env.PATH },
        log: path.join(dir, 'replica-0.log'),
        index: 0,
        port: 1,
      },
      'api',
    );
    await busy.stop();
    await replica.exited;
    expect(replica.exit).toEqual({ code: 3, signal: null });
  }, 15_000);
});
