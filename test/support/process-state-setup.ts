/**
 * Setup file of the `integration` and `temporal` projects (vitest.config.ts): a test file leaves its process as
 * it found it. The project runs without per-file isolation, so one fork runs many files in turn:
 * what a file changes of the process (an environment variable, the working directory, the umask, a
 * process listener, the exit code, fetch's global dispatcher, fake timers) the next file would
 * inherit (session 13: the faults files' `SLOW_MS=0` reached the notifications file, whose tests
 * then failed in CI). This file runs before each test file: it notes the process's state, and
 * after the file's own `afterAll` hooks it fails the file, naming what changed, then puts the
 * state back so the next file starts clean.
 *
 * A file that needs a variable for its whole run sets it with `vi.stubEnv` in a `beforeAll`:
 * every stub is undone here, at the file's end (vi.unstubAllEnvs), before the check.
 */
import path from 'node:path';
import { afterAll, expect, vi } from 'vitest';
import { type ProcessState, processChanges, processState, restoreProcess } from './process-state.js';

const before: ProcessState = processState();

afterAll(() => {
  // Stubs and spies end with the file that made them (a spy on a shared module's prototype would
  // otherwise reach the next file).
  vi.unstubAllEnvs();
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
  const changes = processChanges(before, processState());
  if (changes.length === 0) return;
  restoreProcess(before);
  const testPath = expect.getState().testPath;
  const file = testPath ? path.relative(process.cwd(), testPath) : 'this test file';
  throw new Error(
    `${file} changed its process and did not restore it (its project runs files one after another in a shared process, so the next file would inherit it):\n${changes.map((c) => `  - ${c}`).join('\n')}\nRestore it in an afterAll/afterEach, or set a variable with vi.stubEnv (undone at the file's end).`,
  );
});
