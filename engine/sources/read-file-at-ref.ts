import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { CutoverError } from '../../core/errors.js';

/**
 * The text of a file as it was at a Git revision (for reviewing a change against its base branch).
 * Returns null when the file did not exist at that revision: everything in it is then new.
 */
export async function readFileAtRef(file: string, ref: string): Promise<string | null> {
  // Git reports the top level with symlinks resolved; resolve ours the same way to relate the two.
  const dir = await realpath(path.dirname(path.resolve(file))).catch(() => path.dirname(path.resolve(file)));
  const absolute = path.join(dir, path.basename(file));
  const { simpleGit } = await import('simple-git'); // only plans against a revision need Git
  const git = simpleGit({ baseDir: dir });
  let top: string;
  try {
    top = (await git.revparse(['--show-toplevel'])).trim();
  } catch {
    throw new CutoverError('GIT_REF_UNREADABLE', `${file} is not inside a Git repository`);
  }
  // `--verify --quiet` prints nothing for an unknown revision (and simple-git may not throw for it).
  const commit = await git.revparse(['--verify', '--quiet', `${ref}^{commit}`]).catch(() => '');
  if (commit.trim() === '') throw new CutoverError('GIT_REF_UNREADABLE', `unknown Git revision "${ref}"`);
  const relative = path.relative(top, absolute).split(path.sep).join('/');
  try {
    return await git.show([`${ref}:${relative}`]);
  } catch (error) {
    const message = (error as Error).message;
    if (/does not exist|exists on disk, but not in/.test(message)) return null;
    throw new CutoverError('GIT_REF_UNREADABLE', `cannot read ${relative} at ${ref}: ${message.trim()}`);
  }
}
