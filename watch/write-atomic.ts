import { rename, writeFile } from 'node:fs/promises';

/** Writes `file` whole or not at all: a reader never sees half a report or index. */
export async function writeAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text);
  await rename(tmp, file);
}
