import { mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { CutoverError, environmentFault } from '../../core/errors.js';
import { type CurrentLayout, emptyLayout } from '../../core/layout.js';
import { committedLayout } from '../../core/migration/committed-layout.js';
import type { MigrationState } from '../../core/migration/types.js';
import { removeDeadTemps } from '../../platform/claim-lock.js';
import type { StateDir } from './state-dir.js';

/**
 * The current layout of each environment, one JSON file per environment under the state directory:
 * `<stateDir>/environments/<name>/layout.json`. Written atomically (temp file, fsync, rename), so a
 * crash leaves either the old layout or the new one, never a torn file.
 */
export async function readCurrentLayout(stateDir: StateDir, environment: string): Promise<CurrentLayout> {
  const file = stateDir.layoutFile(environment);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return emptyLayout(environment);
    throw error;
  }
  // Written atomically, so damage came from outside (a disk, an edit); every committed layout is
  // also kept by serial, which is the way back.
  const restore = `the history keeps the last committed layouts: copy the newest file of ${stateDir.layoutHistoryDir(environment)} over it`;
  let layout: CurrentLayout;
  try {
    layout = JSON.parse(text) as CurrentLayout;
  } catch (error) {
    throw new CutoverError(
      'STATE_CORRUPT',
      `${file}: not valid JSON (${(error as Error).message}); ${restore}`,
    );
  }
  if (layout?.environment !== environment || !Number.isSafeInteger(layout.serial)) {
    throw new CutoverError(
      'STATE_CORRUPT',
      `${file}: not the layout of environment "${environment}"; ${restore}`,
    );
  }
  return layout;
}

export async function writeCurrentLayout(stateDir: StateDir, layout: CurrentLayout): Promise<void> {
  await writeJsonAtomic(stateDir.layoutFile(layout.environment), layout);
}

/**
 * Temp file, fsync, rename, fsync of the directory: the old content or the new, never half. A
 * refusal of the disk leaves no temp file and is one line naming `file`.
 */
export async function writeJsonAtomic(file: string, value: unknown): Promise<void> {
  const temp = `${file}.${process.pid}.tmp`;
  try {
    await mkdir(path.dirname(file), { recursive: true });
    removeDeadTemps(file);
    // 0600: a layout holds its topology, whose hook and notify URLs may carry credentials.
    const handle = await open(temp, 'w', 0o600);
    try {
      await handle.writeFile(`${JSON.stringify(value)}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
    const dir = await open(path.dirname(file), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  } catch (error) {
    await rm(temp, { force: true }).catch(() => undefined);
    throw environmentFault(error, `writing ${file}`) ?? error;
  }
}

/** How many recorded layouts an environment keeps when CUTOVER_KEEP_LAYOUTS does not say. */
export const defaultKeptLayouts = 20;

/**
 * How many recorded layouts to keep (`layouts/<serial>.json`, the current one included): the
 * way back of `cutover topology rollback`. CUTOVER_KEEP_LAYOUTS, else 20.
 */
export function keptLayouts(env: NodeJS.ProcessEnv = process.env): number {
  const text = env.CUTOVER_KEEP_LAYOUTS;
  if (text === undefined || text === '') return defaultKeptLayouts;
  const n = /^\d{1,9}$/.test(text) ? Number(text) : 0;
  if (n < 1) {
    throw new CutoverError(
      'USAGE',
      `CUTOVER_KEEP_LAYOUTS=${text}: not a whole number of at least 1 (how many recorded layouts each environment keeps for \`cutover topology rollback\`); set it to e.g. 20, or unset it for the default of ${defaultKeptLayouts}`,
    );
  }
  return n;
}

/**
 * At a commit a bad setting must not stop the commit (it is refused before a migration starts):
 * the default then.
 */
function keptLayoutsAtCommit(): number {
  try {
    return keptLayouts();
  } catch {
    return defaultKeptLayouts;
  }
}

/**
 * Removes the recorded layouts older than the last `keep` (serial ≤ current − keep), so never the
 * current one. Best effort: a file left behind is only kept longer, and the next record removes it.
 */
async function pruneLayouts(stateDir: StateDir, environment: string, current: number, keep: number) {
  const dir = stateDir.layoutHistoryDir(environment);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const serial = /^(\d+)\.json$/.exec(name)?.[1];
    if (serial !== undefined && Number(serial) <= current - Math.max(1, keep)) {
      await rm(path.join(dir, name), { force: true }).catch(() => undefined);
    }
  }
}

/** The last recorded layouts are kept too, by serial (`layouts/<serial>.json`): to roll back, for audit, and to tell a stale plan. */
export async function readLayoutAt(
  stateDir: StateDir,
  environment: string,
  serial: number,
): Promise<CurrentLayout | null> {
  if (serial === 0) return emptyLayout(environment);
  try {
    return JSON.parse(
      await readFile(stateDir.layoutHistoryFile(environment, serial), 'utf8'),
    ) as CurrentLayout;
  } catch {
    return null;
  }
}

/**
 * Records the layout a migration committed: serial + 1, the desired topology, and the slot of
 * every component that is live now (green where the migration replaced it). Idempotent: a layout
 * already recorded by this migration is left as it is, so a commit interrupted after this step and
 * finished on restart does not bump the serial twice.
 */
export async function recordLayout(
  stateDir: StateDir,
  state: MigrationState,
  keep = keptLayoutsAtCommit(),
): Promise<void> {
  const spec = state.spec;
  const current = await readCurrentLayout(stateDir, spec.environment);
  if (current.migrationId === spec.id) return;
  if (current.serial !== spec.base.serial) {
    throw new CutoverError(
      'STATE_CORRUPT',
      `layout of ${spec.environment} is at serial ${current.serial}, but ${spec.id} started from ${spec.base.serial}`,
    );
  }
  const layout = committedLayout(state);
  await writeJsonAtomic(stateDir.layoutHistoryFile(spec.environment, layout.serial), layout);
  await writeCurrentLayout(stateDir, layout);
  await pruneLayouts(stateDir, layout.environment, layout.serial, keep);
}

/** After `down`: nothing runs; the next migration starts from an empty layout (serial + 1). */
export async function recordEmptyLayout(
  stateDir: StateDir,
  previous: CurrentLayout,
  keep = keptLayoutsAtCommit(),
): Promise<void> {
  const layout: CurrentLayout = {
    environment: previous.environment,
    serial: previous.serial + 1,
    topology: null,
    committedAt: new Date().toISOString(),
    slots: {},
  };
  await writeJsonAtomic(stateDir.layoutHistoryFile(layout.environment, layout.serial), layout);
  await writeCurrentLayout(stateDir, layout);
  await pruneLayouts(stateDir, layout.environment, layout.serial, keep);
}
