import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import type { StateDir } from '../store/state-dir.js';

/**
 * The environments a state directory knows, by name: those with a recorded layout or a migration
 * in flight (a directory alone, left by a migration that never committed, is not one).
 */
export async function recordedEnvironments(stateDir: StateDir): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(stateDir.environmentsDir());
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  return names
    .filter((name) => existsSync(stateDir.layoutFile(name)) || existsSync(stateDir.activeFile(name)))
    .sort();
}
