/** The files a driver writes beside its balancer: read when present, replaced whole, put back. */
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';

export async function readIfExists(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

/** Temp file, fsync, rename: a reader (or the balancer's next start) sees the old text or the new, never half. */
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

/** Puts back what `readIfExists` read: the text, or no file when there was none. */
export async function restoreFile(file: string, text: string | null): Promise<void> {
  if (text === null) await rm(file, { force: true });
  else await writeAtomically(file, text);
}
