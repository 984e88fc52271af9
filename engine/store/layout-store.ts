import { mkdir, open, readFile, rename } from 'node:fs/promises';
import path from 'node:path';
import { CutoverError } from '../errors.js';
import { type CurrentLayout, emptyLayout } from '../layout.js';

/**
 * The current layout of each environment, one JSON file per environment under the state directory:
 * `<stateDir>/environments/<name>/layout.json`. Written atomically (temp file, fsync, rename), so a
 * crash leaves either the old layout or the new one, never a torn file.
 */
export function layoutPath(stateDir: string, environment: string): string {
  return path.join(stateDir, 'environments', environment, 'layout.json');
}

export async function readCurrentLayout(stateDir: string, environment: string): Promise<CurrentLayout> {
  const file = layoutPath(stateDir, environment);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return emptyLayout(environment);
    throw error;
  }
  let layout: CurrentLayout;
  try {
    layout = JSON.parse(text) as CurrentLayout;
  } catch (error) {
    throw new CutoverError('STATE_CORRUPT', `${file}: not valid JSON (${(error as Error).message})`);
  }
  if (layout.environment !== environment || !Number.isSafeInteger(layout.serial)) {
    throw new CutoverError('STATE_CORRUPT', `${file}: not the layout of environment "${environment}"`);
  }
  return layout;
}

export async function writeCurrentLayout(stateDir: string, layout: CurrentLayout): Promise<void> {
  const file = layoutPath(stateDir, layout.environment);
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  const handle = await open(temp, 'w');
  try {
    await handle.writeFile(`${JSON.stringify(layout)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, file);
  const dir = await open(path.dirname(file), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
