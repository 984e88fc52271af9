/**
 * The one place the CLI meets its process: the real streams, environment and working directory
 * handed to `main`, and its exit code set. bin/cutover.js loads this (compiled); every other file
 * of cli/ takes what it needs from its `CommandContext` (biome's `noRestrictedGlobals`-like check in
 * test/cli-context.test.ts keeps it so).
 */
import { main } from './main.js';

// A reader that stops early (`cutover topology migration logs ID | head`) closes the pipe: that is
// the end of the output, not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

process.exitCode = await main(process.argv, {
  stdout: process.stdout,
  stderr: process.stderr,
  // Made on first use (confirm's question): made here, it would hold the process open.
  get stdin() {
    return process.stdin;
  },
  env: process.env,
  cwd: process.cwd(),
});
