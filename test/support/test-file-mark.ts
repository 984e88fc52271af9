/**
 * Setup file of every project (vitest.config.ts), run before each test file: the file's path goes
 * into the process's environment as CUTOVER_TEST_FILE, which every process the file starts
 * inherits (a CLI, a server, a runner, a replica), so the run's end-of-run check
 * (leftover-processes.ts) can name the file that started a process left running.
 */
import path from 'node:path';
import { expect } from 'vitest';

const testPath = expect.getState().testPath;
if (testPath) process.env.CUTOVER_TEST_FILE = path.relative(process.cwd(), testPath);
