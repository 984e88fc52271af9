import { readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import { topologyDigest } from '../../core/plan/saved-plan.js';
import { loadTopology } from '../../core/topology/load-topology.js';

/**
 * The Git commit a topology file's content comes from: HEAD of the work tree it is in, when the
 * file is tracked and clean there (its text is HEAD's); else null (not in a work tree, untracked,
 * or edited: no commit holds what was planned). Git is a convenience here, never required.
 */
export async function commitOfFile(file: string): Promise<string | null> {
  const resolved = path.resolve(file);
  const dir = await realpath(path.dirname(resolved)).catch(() => path.dirname(resolved));
  const absolute = path.join(dir, path.basename(resolved));
  const { simpleGit } = await import('simple-git');
  try {
    // simple-git throws at once for a directory that does not exist: no work tree, no commit.
    const git = simpleGit({ baseDir: dir });
    if ((await git.revparse(['--is-inside-work-tree'])).trim() !== 'true') return null;
    // Tracked at HEAD, and no change staged or unstaged: the file's text is HEAD's.
    const tracked = await git.raw(['ls-files', '--error-unmatch', '--', absolute]);
    if (tracked.trim() === '') return null;
    const status = await git.raw(['status', '--porcelain', '--', absolute]);
    if (status.trim() !== '') return null;
    return (await git.revparse(['HEAD'])).trim() || null;
  } catch {
    return null; // not a work tree, no Git, no commit yet, or the file is untracked
  }
}

/**
 * The commit that was applied: HEAD of the work tree `file` is in (commitOfFile), when the file
 * there holds the topology of `appliedText` (the same normalised model). A saved plan planned on a
 * branch and applied from main after the merge records the merge commit here, beside the commit it
 * was planned at; a file that differs from what was applied gives null, never a wrong commit.
 */
export async function appliedCommitOf(file: string, appliedText: string): Promise<string | null> {
  const onDisk = await readFile(file, 'utf8').catch(() => null);
  if (onDisk === null) return null;
  const there = loadTopology(onDisk, { file });
  const applied = loadTopology(appliedText, { file });
  if (!there.ok || !applied.ok) return null;
  if (topologyDigest(there.topology) !== topologyDigest(applied.topology)) return null;
  return commitOfFile(file);
}
