import { type FSWatcher, statSync, watch } from 'node:fs';
import path from 'node:path';

/** How often the table file is checked when change notices do not arrive (network file systems). */
export const tablePollIntervalMs = 500;

export interface TableWatch {
  stop(): void;
}

/**
 * Calls `onChange` when the table file may have changed: on fs.watch notices for its directory (the
 * writer renames a temp file over it, so the file itself is a new inode each time), and when a poll
 * sees its inode, size or mtime differ. `retryWhen` asks the poll to call anyway, e.g. while a
 * listener could not be opened. `onChange` must coalesce: several calls may arrive for one write.
 */
export function watchTable(
  file: string,
  onChange: () => void,
  retryWhen: () => boolean,
  intervalMs = tablePollIntervalMs,
): TableWatch {
  const name = path.basename(file);
  let seen = signature(file);
  let watcher: FSWatcher | null = null;
  try {
    watcher = watch(path.dirname(file), (_event, changed) => {
      if (changed === null || changed === name) onChange();
    });
    watcher.on('error', () => {
      watcher?.close();
      watcher = null; // the poll carries on alone
    });
  } catch {
    // no fs.watch here: the poll alone notices changes
  }
  const poll = setInterval(() => {
    const now = signature(file);
    if (now !== seen || retryWhen()) {
      seen = now;
      onChange();
    }
  }, intervalMs);
  poll.unref();
  return {
    stop() {
      clearInterval(poll);
      watcher?.close();
    },
  };
}

function signature(file: string): string {
  try {
    const stat = statSync(file);
    return `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
  } catch {
    return 'absent';
  }
}
