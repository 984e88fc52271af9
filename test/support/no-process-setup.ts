/**
 * Setup file of the `unit` project (vitest.config.ts): a unit test starts no process. Every way
 * to start one through `node:child_process` throws in this project's workers, naming the project
 * the file belongs in, so a file that starts a process cannot sit in the threads pool unnoticed
 * (there a process it leaves behind has no worker process to be found by, and `process.chdir` and
 * signals do not work). Worker threads each have their own module instances: this changes nothing
 * outside the worker it runs in.
 */
import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';

const starters = ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const;

for (const name of starters) {
  Object.defineProperty(childProcess, name, {
    configurable: true,
    writable: true,
    value: () => {
      throw new Error(
        `child_process.${name} in a unit test: this file starts a process, so it belongs in the integration project (vitest.config.ts)`,
      );
    },
  });
}
syncBuiltinESMExports();
