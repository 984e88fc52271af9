/**
 * The process driver's switch of a stateful component with `replicate.dataDir` (issue 28): files
 * cannot be followed or fenced, so the router's write hold is the fence. The initial copy is made
 * at the replicate stage; under the hold, once nothing is in flight to blue, the final sync copies
 * blue's data directory into green's again and checks that green's now has blue's very content
 * (the position is a digest of it); a rollback's switch copies green's back the same way. What the
 * plan says of it: no lag to bound (the copy is not continuous), the hold lasts as long as the copy.
 *
 * The app must read what its files hold when it serves (not a cache of them): they are replaced
 * under it while no request reaches it. A file deleted on one side stays on the other.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { copyDataDir } from './process-data-dir.js';
import { slotDirOf } from './process-slot.js';
import {
  type ComponentCallContext,
  PermanentDriverError,
  type ReplicationLag,
  type Replicator,
  type SlotInfo,
} from './types.js';

export const dataDirReplicator: Replicator = {
  capabilities: { follow: false, lag: false, fence: false, reverse: false },
  supports: (spec) => spec.replicate?.dataDir !== undefined && spec.replicate.command === undefined,

  async follow(ctx, from, to, options) {
    await copyDataDir(slotDirOf(ctx, from), slotDirOf(ctx, to), dataDirOf(ctx), options);
  },

  async lag(ctx, from, to) {
    const [source, applied] = await Promise.all([digestOf(ctx, from), digestOf(ctx, to)]);
    return { source, applied, bytes: source === applied ? 0 : null, ms: null };
  },

  // The router holds the writes and nothing is in flight to the slot: its content is the position.
  async fence(ctx, slot) {
    return { position: await digestOf(ctx, slot) };
  },

  async unfence() {},

  async catchUp(ctx, from, to, position, deadline, options): Promise<ReplicationLag> {
    await copyDataDir(slotDirOf(ctx, from), slotDirOf(ctx, to), dataDirOf(ctx), options);
    const applied = await digestOf(ctx, to);
    if (applied !== position)
      throw new PermanentDriverError(
        `${to.slot} ${ctx.component}'s data directory differs from ${from.slot}'s after the copy (a file written to meanwhile, or removed on ${from.slot}: the copy does not delete)`,
      );
    if (Date.now() > deadline)
      throw new PermanentDriverError(
        `copying ${ctx.component}'s data directory took longer than the write hold's budget`,
      );
    return { source: position, applied, bytes: 0, ms: 0 };
  },

  async promote() {},
  async reverse() {},
  async stop() {},
};

function dataDirOf(ctx: ComponentCallContext): string {
  return ctx.spec.replicate?.dataDir ?? '.';
}

/** sha256 of the data directory's files (paths and contents, sorted); "empty" when it has none. */
async function digestOf(ctx: ComponentCallContext, slot: SlotInfo): Promise<string> {
  const root = path.resolve(slotDirOf(ctx, slot), 'data', dataDirOf(ctx));
  const hash = createHash('sha256');
  let files = 0;
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full);
      else if (entry.isFile()) {
        files += 1;
        hash.update(`${path.relative(root, full)}\0`);
        hash.update(await readFile(full));
        hash.update('\0');
      }
    }
  };
  if ((await stat(root).catch(() => undefined))?.isDirectory()) await walk(root);
  return files === 0 ? 'empty' : `sha256:${hash.digest('hex').slice(0, 16)}`;
}
