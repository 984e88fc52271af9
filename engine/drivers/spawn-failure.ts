import { existsSync } from 'node:fs';
import { environmentCause } from '../../core/errors.js';

/**
 * Why a program could not be started, and what to do: "program not found (ENOENT); install it, put
 * it on the PATH, or give its full path". Node says "spawn X ENOENT" both for a program it cannot
 * find and for a working directory that does not exist: `cwd` tells the two apart.
 */
export function spawnFailure(error: Error, cwd?: string): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') {
    if (cwd !== undefined && !existsSync(cwd)) return `its working directory ${cwd} does not exist`;
    return 'program not found (ENOENT); install it, put it on the PATH, or give its full path';
  }
  return environmentCause(error) ?? error.message;
}
