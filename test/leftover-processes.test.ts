/**
 * The run's end-of-run check (test/support/leftover-processes.ts) finds a process by the run's mark
 * in its environment, inherited by the process's own children, and never one without it.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { processesOfRun } from './support/leftover-processes.js';
import { eventually } from './support/wait.js';

const started: number[] = [];
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

describe('the leftover-process check', () => {
  it("finds a process of the run and its child by the run's mark, not an unmarked one, and not once they are gone", async () => {
    const run = `check-${randomBytes(4).toString('hex')}`;
    // A shell (marked) that starts a sleep of its own (inheriting the mark), and an unmarked sleep.
    const marked = spawn('sh', ['-c', 'sleep 600 & echo $!; wait'], {
      env: { ...process.env, CUTOVER_TEST_RUN: run },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const unmarked = spawn('sleep', ['600'], { env: { ...process.env, CUTOVER_TEST_RUN: 'another-run' } });
    started.push(marked.pid as number, unmarked.pid as number);
    const child = await new Promise<number>((resolve) =>
      marked.stdout.once('data', (d) => resolve(Number(String(d)))),
    );
    started.push(child);

    await eventually(() => processesOfRun(run).length === 2);
    expect(
      processesOfRun(run)
        .map((p) => p.pid)
        .sort(),
    ).toEqual([marked.pid, child].sort());
    expect(processesOfRun(run).find((p) => p.pid === child)?.command).toBe('sleep 600');
    // Named by the test file that was running when it started (test-file-mark.ts): this one.
    expect(processesOfRun(run).find((p) => p.pid === child)?.startedBy).toBe(
      'test/leftover-processes.test.ts',
    );

    process.kill(child, 'SIGKILL');
    process.kill(marked.pid as number, 'SIGKILL');
    await eventually(() => processesOfRun(run).length === 0);
  });
});
