import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CutoverError } from '../core/errors.js';

/** bin/cutover.js of this installation, for the background processes cutover starts itself. */
export function cutoverCliPath(): string {
  return path.join(packageRoot(), 'bin', 'cutover.js');
}

/** The directory of this installation's package.json (from source, dist/ or its bundle alike). */
export function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'cutover') {
      return dir;
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new CutoverError('INTERNAL', 'cannot find the cutover package');
    dir = parent;
  }
}
