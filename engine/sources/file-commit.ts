import { execFile } from 'node:child_process';
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
  try {
    if ((await git(dir, ['rev-parse', '--is-inside-work-tree'])).trim() !== 'true') return null;
    // Tracked at HEAD, and no change staged or unstaged: the file's text is HEAD's.
    const tracked = await git(dir, ['ls-files', '--error-unmatch', '--', absolute]);
    if (tracked.trim() === '') return null;
    const status = await git(dir, ['status', '--porcelain', '--', absolute]);
    if (status.trim() !== '') return null;
    return (await git(dir, ['rev-parse', 'HEAD'])).trim() || null;
  } catch {
    return null; // not a work tree, no Git, no commit yet, or the file is untracked
  }
}

/**
 * A git command's standard output; rejects when it cannot run or exits non-zero. Not simple-git:
 * loading it costs every migrate ~30 ms of CPU for four plain commands.
 */
function git(dir: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd: dir, encoding: 'utf8', maxBuffer: 1024 * 1024 }, (error, stdout) =>
      error ? reject(error) : resolve(stdout),
    );
  });
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
