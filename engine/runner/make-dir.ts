import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';

/**
 * mkdir -p that tells the real cause: Node's recursive mkdir answers ENOENT on a read-only file
 * system (it gives up walking up), which would read as a missing parent. Creating the first
 * missing level alone gets the kernel's answer (EROFS, EACCES, ENOSPC).
 */
export function makeDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    let missing = dir;
    while (!existsSync(path.dirname(missing)) && path.dirname(missing) !== missing) {
      missing = path.dirname(missing);
    }
    mkdirSync(missing);
    throw error;
  }
}
