/**
 * The Git side of the watcher: a local repository (its refs are watched) or a remote one (fetched
 * into a bare cache clone). Everything is read from commits, never from a working tree.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { type SimpleGit, simpleGit } from 'simple-git';
import { CutoverError } from '../core/errors.js';

export interface Repository {
  /** What the user named: a path or a URL. */
  readonly source: string;
  readonly remote: boolean;
  /** The Git directory to read from (a local repository's, or the cache clone). */
  readonly gitDir: string;
  /** A local repository's working tree (for default state directories); null for a remote. */
  readonly workTree: string | null;
  /** The branch's commit now, or null when the branch does not exist. */
  head(branch: string): Promise<string | null>;
  /** The names of the branches there are (to suggest one when the wanted branch is missing). */
  branches(): Promise<string[]>;
  /** For a remote: fetch the branches into the cache. A no-op for a local repository. */
  fetch(): Promise<void>;
  /** Paths of the files at a commit that the matcher accepts. */
  files(commit: string, accept: (file: string) => boolean): Promise<string[]>;
  /** The blob id of a file at a commit, or null when it is not there. */
  blob(commit: string, file: string): Promise<string | null>;
  /** The text of a blob. */
  read(blob: string): Promise<string>;
  /** Is `ancestor` an ancestor of `commit` (a fast-forward)? */
  isAncestor(ancestor: string, commit: string): Promise<boolean>;
  /** Writes the tree of a commit into a directory (for a migration of that commit). */
  exportTree(commit: string, dir: string): Promise<void>;
}

export function looksRemote(source: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(source) || /^[^/\s]+@[^:\s]+:/.test(source);
}

/** Opens a local repository, or clones a remote one into `cacheRoot` (once) and reuses the clone. */
export async function openRepository(source: string, cacheRoot: string): Promise<Repository> {
  if (looksRemote(source)) {
    const cache = path.join(cacheRoot, createHash('sha256').update(source).digest('hex').slice(0, 16));
    if (!existsSync(path.join(cache, 'HEAD'))) {
      mkdirSync(cacheRoot, { recursive: true });
      rmSync(cache, { recursive: true, force: true });
      try {
        await simpleGit().clone(source, cache, ['--mirror', '--quiet']);
      } catch (error) {
        rmSync(cache, { recursive: true, force: true });
        throw new CutoverError('GIT_REF_UNREADABLE', `cannot clone ${source}: ${firstLine(error)}`);
      }
    }
    return repository(source, true, cache, null);
  }
  const dir = path.resolve(source);
  if (!existsSync(dir)) throw new CutoverError('USAGE', `--repo ${source}: no such directory`);
  const git = simpleGit({ baseDir: dir });
  let gitDir: string;
  let workTree: string | null;
  try {
    gitDir = path.resolve(dir, (await git.revparse(['--git-common-dir'])).trim());
    const bare = (await git.revparse(['--is-bare-repository'])).trim() === 'true';
    workTree = bare ? null : (await git.revparse(['--show-toplevel'])).trim();
  } catch {
    throw new CutoverError('USAGE', `--repo ${source}: not a Git repository`);
  }
  return repository(source, false, gitDir, workTree);
}

function repository(source: string, remote: boolean, gitDir: string, workTree: string | null): Repository {
  // Every command names the Git directory itself (`--git-dir`) and inherits the user's environment
  // untouched: handing simple-git that environment (`.env()`) makes it refuse every command when
  // EDITOR, PAGER, GIT_CONFIG_GLOBAL or GIT_SSH_COMMAND is set (as npm and many shells do), and
  // a refused `rev-parse` used to read as "branch does not exist".
  const git: SimpleGit = simpleGit({ baseDir: gitDir });
  const run = (args: string[]) => git.raw([`--git-dir=${gitDir}`, ...args]);
  return {
    source,
    remote,
    gitDir,
    workTree,
    async head(branch) {
      // `for-each-ref` prints nothing for a missing branch and fails only when Git does.
      const ref = `refs/heads/${branch}`;
      const out = await run(['for-each-ref', '--format=%(objectname) %(refname)', ref]);
      for (const line of out.split('\n')) {
        const [sha, name] = line.trim().split(' ');
        if (name === ref && sha) return sha;
      }
      return null;
    },
    async branches() {
      const out = await run(['for-each-ref', '--format=%(refname:short)', 'refs/heads/']);
      return out
        .split('\n')
        .map((line) => line.trim())
        .filter((line) => line !== '');
    },
    async fetch() {
      if (!remote) return;
      try {
        await run(['fetch', '--prune', '--quiet', 'origin', '+refs/heads/*:refs/heads/*']);
      } catch (error) {
        throw new CutoverError('GIT_REF_UNREADABLE', `cannot fetch ${source}: ${firstLine(error)}`);
      }
    },
    async files(commit, accept) {
      const out = await run(['ls-tree', '-r', '--name-only', '-z', commit]);
      return out.split('\u0000').filter((f) => f !== '' && accept(f));
    },
    async blob(commit, file) {
      const sha = await run(['rev-parse', '--verify', '--quiet', `${commit}:${file}`]).catch(() => '');
      return sha.trim() === '' ? null : sha.trim();
    },
    async read(blob) {
      return run(['cat-file', 'blob', blob]);
    },
    async isAncestor(ancestor, commit) {
      // Not `merge-base --is-ancestor`: it answers by exit status alone, and simple-git resolves a
      // command that fails without a word on stderr, so every move read as a fast-forward. The
      // merge base of an ancestor and its descendant is the ancestor; of unrelated commits, none.
      const base = await run(['merge-base', ancestor, commit]).catch(() => '');
      return base.trim() === ancestor;
    },
    async exportTree(commit, dir) {
      mkdirSync(dir, { recursive: true });
      await pipeArchive(gitDir, commit, dir);
    },
  };
}

/** `git archive COMMIT | tar -x -C DIR`, without a shell. */
function pipeArchive(gitDir: string, commit: string, dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const archive = spawn('git', ['--git-dir', gitDir, 'archive', '--format=tar', commit], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const tar = spawn('tar', ['-x', '-C', dir], { stdio: ['pipe', 'ignore', 'pipe'] });
    archive.stdout.pipe(tar.stdin);
    let errors = '';
    archive.stderr.on('data', (c) => {
      errors += c;
    });
    tar.stderr.on('data', (c) => {
      errors += c;
    });
    let pending = 2;
    let failed = false;
    const done = (code: number | null) => {
      if (code !== 0) failed = true;
      if (--pending === 0) {
        if (failed)
          reject(new CutoverError('GIT_REF_UNREADABLE', `cannot export ${commit}: ${errors.trim()}`));
        else resolve();
      }
    };
    archive.on('close', done);
    tar.on('close', done);
    archive.on('error', reject);
    tar.on('error', reject);
  });
}

function firstLine(error: unknown): string {
  return ((error as Error).message ?? String(error)).trim().split('\n')[0] ?? '';
}
