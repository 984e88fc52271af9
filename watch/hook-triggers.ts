/**
 * Webhook triggers: files that `cutover server` drops into `<state>/watch/hooks/` on a verified
 * push (written as a dot file, renamed in when complete), each asking a watcher of that state
 * directory to look now. Every watcher on the state directory sees every trigger, so a trigger is
 * matched to a repository: it names the repository pushed to (its clone, SSH and web URLs and full
 * name, as the push's payload gave them), and a watcher takes only those that name its own.
 *
 * Invariants: a watcher removes each trigger for its repository once it has acted on it, in every
 * mode (remote, local, `--once`), and never removes one for another repository, which another
 * watcher may need. A trigger that names no repository is for every watcher: each acts on it and
 * none removes it. Triggers nobody took are removed by any watcher after `staleTriggerMs`, so that
 * none piles up.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { watch as chokidarWatch, type FSWatcher } from 'chokidar';
import { StateDir } from '../engine/store/state-dir.js';

/**
 * A trigger untaken this long is stale: its watcher takes it within moments when it runs, and a
 * watcher that starts fetches (or looks) at once anyway.
 */
export const staleTriggerMs = 10 * 60 * 1000;

/** `stateDir`: the state directory's path, as the watcher holds it. */
export function hooksDir(stateDir: string): string {
  return StateDir.at(stateDir).watchHooksDir();
}

/** Whether a directory entry is a complete trigger (not one still being written). */
function isTrigger(name: string): boolean {
  return !name.startsWith('.');
}

/** Triggers present now (complete ones), as paths. */
export function pendingTriggers(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter(isTrigger)
    .map((name) => path.join(dir, name));
}

export interface Trigger {
  file: string;
  /** What push it was for (` (refs/heads/main → 1a2b3c4)`), or nothing when it does not tell. */
  note: string;
  /** The repository pushed to, as URLs and a full name (`owner/name`); empty when the push named none. */
  names: string[];
}

/** Reads a trigger; null when it is gone (taken by another watcher meanwhile). */
export function readTrigger(file: string): Trigger | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const trigger: Trigger = { file, note: '', names: [] };
  try {
    const hook = JSON.parse(text) as { ref?: unknown; after?: unknown; repository?: unknown };
    const ref = typeof hook.ref === 'string' ? hook.ref : undefined;
    const after = typeof hook.after === 'string' ? hook.after.slice(0, 7) : undefined;
    if (ref !== undefined || after !== undefined) {
      trigger.note = ` (${ref ?? '?'}${after === undefined ? '' : ` → ${after}`})`;
    }
    const repository = hook.repository;
    if (typeof repository === 'string') trigger.names = [repository];
    // { clone_url, ssh_url, html_url, full_name }, those the push gave
    else if (repository !== null && typeof repository === 'object') {
      trigger.names = Object.values(repository).filter(
        (name): name is string => typeof name === 'string' && name !== '',
      );
    }
  } catch {
    // a trigger without details still triggers, every watcher
  }
  return trigger;
}

/**
 * A repository's identity as URLs and paths name it, comparable across their forms: a path (local,
 * or a `file:` URL) resolved; otherwise `host/path`, lower case, without scheme, user, port, a
 * trailing `.git` or slash (`https://github.com/a/b`, `git@github.com:a/b.git` and
 * `ssh://git@github.com:22/a/b.git` are one). Null for what is not a URL or path (a full name).
 */
function identity(name: string): string | null {
  const text = name.trim();
  const trim = (s: string) =>
    s
      .replace(/\/+$/, '')
      .replace(/\.git$/i, '')
      .replace(/\/+$/, '');
  if (/^file:\/\//i.test(text)) {
    try {
      return `file:${trim(realPath(fileURLToPath(text)))}`;
    } catch {
      return null;
    }
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
    try {
      const url = new URL(text);
      return trim(`${url.hostname}${decodeURIComponent(url.pathname)}`).toLowerCase();
    } catch {
      return null;
    }
  }
  const scp = /^[^/\s]+@([^:\s]+):(.+)$/.exec(text);
  if (scp) return trim(`${scp[1]}/${(scp[2] as string).replace(/^\/+/, '')}`).toLowerCase();
  if (path.isAbsolute(text)) return `file:${trim(realPath(text))}`;
  return null;
}

/** A directory as the file system knows it (links resolved), when it exists. */
function realPath(dir: string): string {
  try {
    return realpathSync(dir);
  } catch {
    return path.resolve(dir);
  }
}

/**
 * Matches triggers to one watcher's repository, given as its remote URL, or as a local
 * repository's directories (its working tree and Git directory, absolute).
 */
export function triggerMatcher(names: readonly string[]): (trigger: Trigger) => boolean {
  const own = new Set(names.map(identity).filter((id): id is string => id !== null));
  return (trigger) => {
    if (trigger.names.length === 0) return true;
    return trigger.names.some((name) => {
      const id = identity(name);
      if (id !== null) return own.has(id);
      // A full name (`owner/name`): the path of a remote's URL on any host.
      const full = name
        .trim()
        .replace(/\.git$/i, '')
        .toLowerCase();
      return (
        /^[^/\s]+\/[^/\s]+$/.test(full) &&
        [...own].some((o) => !o.startsWith('file:') && o.endsWith(`/${full}`))
      );
    });
  };
}

/** Takes a trigger acted on: removes it, unless it names no repository (every watcher's). */
export function takeTrigger(trigger: Trigger): void {
  if (trigger.names.length > 0) rmSync(trigger.file, { force: true });
}

/**
 * Removes the triggers (and any a server began and never renamed in) older than `staleTriggerMs`
 * by their mtime: a listing and a stat each. Returns how many.
 */
export function pruneTriggers(dir: string, now = Date.now()): number {
  if (!existsSync(dir)) return 0;
  let removed = 0;
  for (const name of readdirSync(dir)) {
    const file = path.join(dir, name);
    try {
      if (now - statSync(file).mtimeMs > staleTriggerMs) {
        rmSync(file, { force: true });
        removed += 1;
      }
    } catch {
      // taken meanwhile by its watcher
    }
  }
  return removed;
}

/** Watches for triggers (those already there included); resolves once the watch is ready. */
export async function watchTriggers(dir: string, onTrigger: (file: string) => void): Promise<FSWatcher> {
  mkdirSync(dir, { recursive: true });
  const watcher = chokidarWatch(dir, {
    ignoreInitial: false,
    depth: 0,
    ignored: (file) => file !== dir && !isTrigger(path.basename(file)),
  });
  watcher.on('add', onTrigger);
  await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
  // A trigger renamed into place while the watch was being set up (after its first listing of
  // the directory, before its notices began) is reported by neither: look once more now. A
  // trigger seen twice is harmless: taking it removes it, and a second look finds nothing.
  for (const file of pendingTriggers(dir)) onTrigger(file);
  return watcher;
}
