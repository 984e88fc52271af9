/**
 * The commits a watcher exported for its migrations: `<state>/watch/trees/<environment>/<sha>`, and
 * beside them an index of which migration ran from which commit. A migration runs its commit's own
 * tree (scripts, apps), never the working tree; pruning removes the trees nothing needs any more.
 */
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { SlotInfo } from '../core/layout.js';
import type { MigrationService } from '../engine/services/migration-service.js';
import { StateDir } from '../engine/store/state-dir.js';
import type { Repository } from './git.js';
import { writeAtomic } from './write-atomic.js';

/** Commits exported for one environment's migrations. */
export function treesOf(stateDir: string, environment: string): string {
  return StateDir.at(stateDir).watchTreesDir(environment);
}

/** Beside the trees: which migration ran from which commit (`{ "<migration id>": "<sha>" }`). */
const treeIndexFile = 'migrations.json';

/** The directory of `commit`'s tree, exported from `repo` unless it is there already. */
export async function exportTreeOnce(
  repo: Repository,
  stateDir: string,
  environment: string,
  commit: string,
): Promise<string> {
  const tree = path.join(treesOf(stateDir, environment), commit);
  if (!existsDir(tree)) await repo.exportTree(commit, tree);
  return tree;
}

export async function recordTree(
  stateDir: string,
  environment: string,
  migrationId: string,
  commit: string,
): Promise<void> {
  const dir = treesOf(stateDir, environment);
  const index = readTreeIndex(dir);
  index[migrationId] = commit;
  await writeAtomic(path.join(dir, treeIndexFile), `${JSON.stringify(index, null, 2)}\n`);
}

/**
 * Removes the exported trees of an environment that nothing needs any more. Kept: the tree of the
 * live layout (its blue slots are drained and retired with its scripts), those of a migration in
 * flight (its desired and its base), the commits in `keep` (one just started, which a runner may
 * not have claimed yet; one waiting to be applied), the tree of every migration whose slot is still
 * live (a component no later migration replaced still runs from it), and any tree this watcher has
 * no record of.
 */
export async function pruneTrees(
  service: MigrationService,
  stateDir: string,
  environment: string,
  keepCommits: readonly string[],
): Promise<void> {
  const dir = treesOf(stateDir, environment);
  const entries = readdirSync(dir).filter((entry) => entry !== treeIndexFile);
  const index = readTreeIndex(dir);
  const keep = new Set<string>(keepCommits);
  const keepDir = (baseDir: string | undefined) => {
    const relative = baseDir === undefined ? '' : path.relative(dir, baseDir);
    if (relative && !relative.startsWith('..') && !path.isAbsolute(relative))
      keep.add(relative.split(path.sep)[0] as string);
  };
  const layout = await service.currentLayout(environment);
  keepDir(layout.baseDir);
  const active = await service.inFlight(environment);
  if (active !== null) {
    const { state } = await service.show(active);
    keepDir(state.spec.baseDir);
    keepDir(state.spec.base.baseDir);
  }
  const live = new Set(Object.values(layout.slots ?? {}).map(slotKey));
  const removed: string[] = [];
  for (const entry of entries) {
    if (keep.has(entry)) continue;
    const ids = Object.keys(index).filter((id) => index[id] === entry);
    if (ids.length === 0) continue; // not exported by a migration this watcher recorded
    let needed = false;
    for (const id of ids) {
      const { state } = await service.show(id);
      needed = Object.values(state.slots).some(
        (pair) => pair.green !== undefined && live.has(slotKey(pair.green)),
      );
      if (needed) break;
    }
    if (needed) continue;
    rmSync(path.join(dir, entry), { recursive: true, force: true });
    removed.push(entry);
  }
  if (removed.length > 0) {
    for (const id of Object.keys(index)) if (removed.includes(index[id] as string)) delete index[id];
    await writeAtomic(path.join(dir, treeIndexFile), `${JSON.stringify(index, null, 2)}\n`);
  }
}

function readTreeIndex(dir: string): Record<string, string> {
  try {
    const index = JSON.parse(readFileSync(path.join(dir, treeIndexFile), 'utf8')) as unknown;
    return index !== null && typeof index === 'object' ? (index as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/** A live slot as its driver reported it (the layout renames it blue; the migration had it green). */
function slotKey(slot: SlotInfo): string {
  return JSON.stringify([slot.component, slot.version, slot.addresses, slot.details ?? null]);
}

function existsDir(dir: string): boolean {
  try {
    readdirSync(dir);
    return true;
  } catch {
    return false;
  }
}
