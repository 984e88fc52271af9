import { rename, rm, writeFile } from 'node:fs/promises';
import { environmentFault } from '../core/errors.js';
import { type CommandContext, pathIn } from './context.js';

/** Writes to a file atomically (a reader never sees half a plan), or to stdout when no file is given. */
export async function writeOutput(
  text: string,
  to: string | undefined,
  context: Pick<CommandContext, 'stdout' | 'cwd'>,
): Promise<void> {
  if (to === undefined || to === '-') {
    await new Promise<void>((resolve, reject) =>
      context.stdout.write(text, (e) => (e ? reject(e) : resolve())),
    );
    return;
  }
  if (to === '/dev/null') return;
  const file = pathIn(context, to);
  const temp = `${file}.${process.pid}.tmp`;
  try {
    await writeFile(temp, text);
    await rename(temp, file);
  } catch (error) {
    // The temporary file is ours, not the user's: neither left behind nor named.
    await rm(temp, { force: true }).catch(() => undefined);
    throw environmentFault(error, `writing ${to}`) ?? error;
  }
}
