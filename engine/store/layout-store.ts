import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
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
  const restore = `the history keeps every committed layout: copy the newest file of ${stateDir.layoutHistoryDir(environment)} over it`;
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
    const handle = await open(temp, 'w');
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

/** Every committed layout is kept too, by serial (`layouts/<serial>.json`): for audit, and to tell a stale plan. */
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
export async function recordLayout(stateDir: StateDir, state: MigrationState): Promise<void> {
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
}

/** After `down`: nothing runs; the next migration starts from an empty layout (serial + 1). */
export async function recordEmptyLayout(stateDir: StateDir, previous: CurrentLayout): Promise<void> {
  const layout: CurrentLayout = {
    environment: previous.environment,
    serial: previous.serial + 1,
    topology: null,
    committedAt: new Date().toISOString(),
    slots: {},
  };
  await writeJsonAtomic(stateDir.layoutHistoryFile(layout.environment, layout.serial), layout);
  await writeCurrentLayout(stateDir, layout);
}
