/** The haproxy driver's record of its routes (`haproxy/routes.json`) and its atomic file writes. */
import { mkdir, open, readFile, rename } from 'node:fs/promises';
import path from 'node:path';
import type { HaproxyRecord } from './haproxy-config.js';
import { PermanentDriverError } from './types.js';

export async function readRecord(file: string): Promise<HaproxyRecord> {
  const text = await readIfExists(file);
  if (text === null) return { version: 1, routes: {} };
  let parsed: Partial<HaproxyRecord> | null = null;
  try {
    parsed = JSON.parse(text) as Partial<HaproxyRecord>;
  } catch {
    // reported below
  }
  if (parsed?.version !== 1 || typeof parsed.routes !== 'object' || parsed.routes === null)
    throw new PermanentDriverError(`${file} is not a cutover haproxy record ({version: 1, routes: {...}})`);
  return parsed as HaproxyRecord;
}

export async function readIfExists(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

export async function writeAtomically(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  const handle = await open(temp, 'w');
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, file);
}
