/**
 * Webhook triggers: files that `cutover server` drops into `<state>/watch/hooks/` on a verified
 * push (written as a dot file, renamed in when complete), each asking the watchers of that state
 * directory to look now. Invariant: a watcher removes every trigger it has acted on, in every mode
 * (remote, local, `--once`), so that none piles up.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { watch as chokidarWatch, type FSWatcher } from 'chokidar';

export function hooksDir(stateDir: string): string {
  return path.join(stateDir, 'watch', 'hooks');
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

/**
 * Takes a trigger: removes it, and says what push it was for (` (refs/heads/main → 1a2b3c4)`),
 * or nothing when it does not tell.
 */
export function consumeTrigger(file: string): string {
  let note = '';
  try {
    const hook = JSON.parse(readFileSync(file, 'utf8')) as { ref?: unknown; after?: unknown };
    const ref = typeof hook.ref === 'string' ? hook.ref : undefined;
    const after = typeof hook.after === 'string' ? hook.after.slice(0, 7) : undefined;
    if (ref !== undefined || after !== undefined) {
      note = ` (${ref ?? '?'}${after === undefined ? '' : ` → ${after}`})`;
    }
  } catch {
    // a trigger without details still triggers
  }
  rmSync(file, { force: true });
  return note;
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
  return watcher;
}
