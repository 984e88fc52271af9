/**
 * The redis driver's Replicator (types.ts): Redis's own replication between the servers of two
 * slots. Positions are replication offsets (`master_repl_offset`), which a replica shares with its
 * primary once synced.
 *
 * - follow: `to` runs `REPLICAOF 127.0.0.1 <from's port>`: a full sync (streamed), then the
 *   primary's write stream. Called again while `to` already follows `from`, it is left as it is.
 * - lag: bytes are `from`'s master_repl_offset less what `to` processed (its slave_repl_offset,
 *   read from `to` itself, not the once-a-second acknowledgement); at least 1 while the link is down
 *   or the full sync runs. ms is measured: how long `to` takes to process what `from` had written
 *   when lag was asked (polled every 10 ms; 0 when caught up); past maxLag + 1 s it stops waiting
 *   and reports the time waited, a lower bound.
 * - fence: `CLIENT PAUSE <ms> WRITE` on the slot: commands that may write wait (clients are held,
 *   not refused), and so do key expiry and eviction, so the offset read after it on the same
 *   connection is final. The pause lasts until the deadline plus 5 s: a runner that dies leaves no
 *   side fenced for longer. A server that does not answer the pause by the deadline (a long script
 *   or command holds it) fails the call; CLIENT UNPAUSE goes right after on the same connection.
 * - unfence: a slot that follows another is made a primary again (`REPLICAOF NO ONE`: the undo of
 *   a switch that did not release, when the other side took no write), then CLIENT UNPAUSE.
 * - catchUp: waits until `to` processed `from`'s offset read after the fence.
 * - promote: `REPLICAOF NO ONE`, then CLIENT UNPAUSE. Redis keeps the old replication id as its
 *   second one, so the old primary can continue from its own offset (a partial resync).
 * - reverse: the old primary (fenced) runs `REPLICAOF <new primary>`, then CLIENT UNPAUSE (a
 *   replica refuses writes itself: READONLY; and a paused server would not apply the stream).
 * - stop: `to`, if it follows `from`, runs `REPLICAOF NO ONE`; a side already gone is skipped.
 *
 * Why not FAILOVER: it pauses, waits and swaps in one asynchronous command of the old primary, but
 * the engine journals fence, catch-up, promote and reverse as separate commands that each may run
 * again after a crash, and promote must work with the old primary gone; the steps above are what
 * FAILOVER does, one command each.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseInfo, RedisConnectionError, RedisReplyError, redis, redisPipeline } from './redis-client.js';
import { callTimeoutMs, portOf } from './redis-server.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type ReplicationLag,
  type Replicator,
  type SlotInfo,
} from './types.js';

/** A catch-up and a lag measure poll this often. */
const pollMs = 10;
/** A fence's pause outlasts its deadline by this (like the router's own bound of its hold). */
const fenceGraceMs = 5_000;
/** Without a deadline left, a fence still gives the server this long to answer. */
const minFenceWaitMs = 250;

interface ReplicationInfo {
  role: 'master' | 'slave';
  offset: number;
  replid: string;
  /** A replica: its primary, whether the link is up and synced, what it processed. */
  master?: { port: number; up: boolean; syncing: boolean };
}

async function replicationInfo(port: number, signal: AbortSignal): Promise<ReplicationInfo> {
  return toInfo(parseInfo(await redis(port, ['INFO', 'replication'], { signal, timeoutMs: callTimeoutMs })));
}

function toInfo(info: Record<string, string>): ReplicationInfo {
  const role = info.role === 'slave' ? 'slave' : 'master';
  const out: ReplicationInfo = {
    role,
    offset: Number(info[role === 'slave' ? 'slave_repl_offset' : 'master_repl_offset'] ?? 0),
    replid: info.master_replid ?? '',
  };
  if (role === 'slave')
    out.master = {
      port: Number(info.master_port),
      up: info.master_link_status === 'up',
      syncing: info.master_sync_in_progress === '1',
    };
  return out;
}

function follows(info: ReplicationInfo, from: SlotInfo): boolean {
  return info.role === 'slave' && info.master?.port === portOf(from);
}

export function createRedisReplicator(): Replicator {
  return {
    capabilities: { follow: true, lag: true, fence: true, reverse: true },

    async follow(ctx, from, to, options) {
      const info = await replicationInfo(portOf(to), options.signal);
      if (follows(info, from)) {
        options.log(`${ctx.component}: ${to.slot} already follows ${from.slot}`);
        return;
      }
      await command(portOf(to), ['REPLICAOF', '127.0.0.1', String(portOf(from))], options);
      options.log(`${ctx.component}: ${to.slot} follows ${from.slot} (REPLICAOF, full sync)`);
    },

    async lag(ctx, from, to, options) {
      const bound = (ctx.spec.replicate?.maxLag ?? 1_000) + 1_000;
      return measureLag(ctx, from, to, bound, options.signal);
    },

    async fence(ctx, slot, deadline, options) {
      const waitMs = Math.max(deadline - Date.now(), minFenceWaitMs);
      const pauseMs = waitMs + fenceGraceMs;
      let replies: Awaited<ReturnType<typeof redisPipeline>>;
      try {
        replies = await redisPipeline(
          portOf(slot),
          [
            ['CLIENT', 'PAUSE', String(pauseMs), 'WRITE'],
            ['INFO', 'replication'],
          ],
          { signal: options.signal, timeoutMs: waitMs, onTimeout: [['CLIENT', 'UNPAUSE']] },
        );
      } catch (error) {
        if (error instanceof RedisConnectionError && !error.unreachable)
          throw new PermanentDriverError(
            `${ctx.component}'s ${slot.slot} could not be fenced: redis did not answer CLIENT PAUSE within ${waitMs} ms, so a command or script still runs on it (SLOWLOG GET names it once it ends); the fence is lifted`,
          );
        throw error;
      }
      const [paused, info] = replies;
      if (paused instanceof RedisReplyError)
        throw new PermanentDriverError(
          `${ctx.component}'s ${slot.slot} refused CLIENT PAUSE: ${paused.message}`,
        );
      const position = String(toInfo(parseInfo(info)).offset);
      options.log(
        `${ctx.component}: ${slot.slot} fenced (CLIENT PAUSE WRITE for ${pauseMs} ms) at offset ${position}`,
      );
      return { position };
    },

    async unfence(ctx, slot, options) {
      const info = await replicationInfo(portOf(slot), options.signal);
      if (info.role === 'slave') {
        await command(portOf(slot), ['REPLICAOF', 'NO', 'ONE'], options);
        options.log(
          `${ctx.component}: ${slot.slot} stopped following port ${info.master?.port} to take writes again`,
        );
      }
      await command(portOf(slot), ['CLIENT', 'UNPAUSE'], options);
      options.log(`${ctx.component}: ${slot.slot} unfenced (CLIENT UNPAUSE)`);
    },

    async catchUp(ctx, from, to, position, deadline, options) {
      const target = Number(position);
      for (;;) {
        const info = await replicationInfo(portOf(to), options.signal);
        if (!follows(info, from))
          throw new PermanentDriverError(`${to.slot} of ${ctx.component} does not follow ${from.slot}`);
        if (info.master?.up && !info.master.syncing && info.offset >= target)
          return { source: position, applied: String(info.offset), bytes: 0, ms: 0 };
        if (Date.now() >= deadline) {
          const state = !info.master?.up
            ? 'its link to it is down'
            : info.master.syncing
              ? 'its full sync runs'
              : '';
          throw new PermanentDriverError(
            `${to.slot} of ${ctx.component} did not apply ${from.slot}'s offset ${position} in time: at ${info.offset}, ${Math.max(0, target - info.offset)} bytes short${state ? `; ${state}` : ''}`,
          );
        }
        await sleep(pollMs, undefined, { signal: options.signal });
      }
    },

    async promote(ctx, slot, options) {
      const info = await replicationInfo(portOf(slot), options.signal);
      if (info.role === 'slave') await command(portOf(slot), ['REPLICAOF', 'NO', 'ONE'], options);
      await command(portOf(slot), ['CLIENT', 'UNPAUSE'], options);
      options.log(
        `${ctx.component}: ${slot.slot} promoted at offset ${info.offset}${info.role === 'slave' ? ` (stopped following port ${info.master?.port})` : ' (it was a primary)'}`,
      );
    },

    async reverse(ctx, from, to, options) {
      const info = await replicationInfo(portOf(to), options.signal);
      if (!follows(info, from))
        await command(portOf(to), ['REPLICAOF', '127.0.0.1', String(portOf(from))], options);
      await command(portOf(to), ['CLIENT', 'UNPAUSE'], options);
      options.log(
        `${ctx.component}: ${to.slot} follows ${from.slot} back from its offset ${info.offset} (REPLICAOF; read-only)`,
      );
    },

    async stop(ctx, from, to, options) {
      let info: ReplicationInfo;
      try {
        info = await replicationInfo(portOf(to), options.signal);
      } catch (error) {
        if (!(error instanceof RedisConnectionError) || !error.unreachable) throw error;
        options.log(`${ctx.component}: ${to.slot} is unreachable; nothing to stop there (${error.message})`);
        return;
      }
      if (!follows(info, from)) return;
      await command(portOf(to), ['REPLICAOF', 'NO', 'ONE'], options);
      options.log(`${ctx.component}: ${to.slot} no longer follows ${from.slot}`);
    },
  };
}

async function command(port: number, args: string[], options: DriverCallOptions): Promise<void> {
  try {
    await redis(port, args, { signal: options.signal, timeoutMs: callTimeoutMs });
  } catch (error) {
    if (error instanceof RedisReplyError)
      throw new PermanentDriverError(
        `redis on 127.0.0.1:${port} refused ${args.join(' ')}: ${error.message}`,
      );
    throw error;
  }
}

/** The lag of `to` behind `from` (see the file's comment), waiting at most `boundMs` to measure its time. */
export async function measureLag(
  ctx: ComponentCallContext,
  from: SlotInfo,
  to: SlotInfo,
  boundMs: number,
  signal: AbortSignal,
): Promise<ReplicationLag> {
  const source = await replicationInfo(portOf(from), signal);
  const asked = Date.now();
  const follower = await replicationInfo(portOf(to), signal);
  if (!follows(follower, from))
    throw new PermanentDriverError(`${to.slot} of ${ctx.component} does not follow ${from.slot}`);
  const synced = () => follower.master?.up === true && !follower.master.syncing;
  const lag = (ms: number | null): ReplicationLag => ({
    source: String(source.offset),
    applied: String(follower.offset),
    bytes: synced()
      ? Math.max(0, source.offset - follower.offset)
      : Math.max(1, source.offset - follower.offset),
    ms,
  });
  if (!synced()) return lag(null);
  const first = lag(0);
  if (first.bytes === 0) return first;
  while (Date.now() - asked < boundMs) {
    await sleep(pollMs, undefined, { signal });
    const now = await replicationInfo(portOf(to), signal);
    if (!follows(now, from) || !now.master?.up) break;
    if (now.offset >= source.offset) return { ...first, ms: Date.now() - asked };
  }
  return { ...first, ms: Date.now() - asked };
}
