import { rename, writeFile } from 'node:fs/promises';

/** Writes to a file atomically (a reader never sees half a plan), or to stdout when no file is given. */
export async function writeOutput(text: string, file: string | undefined): Promise<void> {
  if (file === undefined || file === '-') {
    await new Promise<void>((resolve, reject) =>
      process.stdout.write(text, (e) => (e ? reject(e) : resolve())),
    );
    return;
  }
  if (file === '/dev/null') return;
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, text);
  await rename(temp, file);
}
