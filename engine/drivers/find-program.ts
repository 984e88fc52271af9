/** Finding a server program a driver runs (PostgreSQL's initdb, redis-server) on this machine. */
import { access, constants } from 'node:fs/promises';
import path from 'node:path';

/** The directories of the runner's PATH, in order. */
export function pathDirs(): string[] {
  return (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
}

/** The first `<dir>/<program>` of `dirs` that is executable, or null. */
export async function findProgram(program: string, dirs: readonly string[]): Promise<string | null> {
  for (const dir of dirs) {
    const file = path.join(dir, program);
    if (await isExecutable(file)) return file;
  }
  return null;
}

export async function isExecutable(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
