/**
 * The redis driver: a stateful component realised as a redis-server per slot, replicated between
 * slots with Redis's own replication (redis-replicator.ts).
 *
 * Contract (for its docs page, docs/drivers/redis.md):
 *
 * - A slot is `<component>-<migrationId>` (`details.slotId`) in
 *   `<stateDir>/environments/<environment>/slots/<slotId>/`: `redis.conf` (the server's settings),
 *   `data/` (its append-only file), `redis.log` (its output) and `server.json` (its port and pid).
 * - provision starts redis-server detached on a free port of 127.0.0.1 (no password: loopback only),
 *   with `appendonly yes` and the driver's `appendfsync`, and waits until it answers PING. The
 *   slot's address is `127.0.0.1:<port>`. Provisioning a slot again stops and removes what an
 *   earlier attempt left there.
 * - replicate (the one-time copy, for a runner without the switch): green follows blue, catches up
 *   with blue's offset of the moment, is promoted and stops following.
 * - drain does nothing; retire stops the server (SIGTERM to its process group: it writes its AOF
 *   and exits; SIGKILL after 10 s) and keeps the directory. Idempotent.
 * - observe: running (server alive, port accepting), not_answering, not_running.
 */
import { mkdir } from 'node:fs/promises';
import { defaults } from '../../core/topology/types.js';
import { tcpProbe } from '../health/probes.js';
import { PortPool } from './port-pool.js';
import { parseInfo, redis } from './redis-client.js';
import { createRedisReplicator } from './redis-replicator.js';
import {
  callTimeoutMs,
  logTail,
  portOf,
  readServer,
  recordOf,
  redisSettings,
  serverAlive,
  slotDirOf,
  startServer,
  stopServer,
} from './redis-server.js';
import type { ComponentDriver } from './types.js';

/** A server's port that does not accept a connection within this is `not_answering`. */
const connectTimeoutMs = 1_000;

export interface RedisDriverOptions {
  /** Where the servers' ports come from; share one with every driver that may provision at the same time. */
  ports?: PortPool;
}

export function createRedisDriver(driverOptions: RedisDriverOptions = {}): ComponentDriver {
  const ports = driverOptions.ports ?? new PortPool();
  const replication = createRedisReplicator();
  return {
    async provision(ctx, slot, options) {
      options.signal.throwIfAborted();
      const settings = await redisSettings(ctx);
      const slotId = `${ctx.component}-${ctx.migrationId}`;
      const slotDir = ctx.stateDir.slotDir(ctx.environment, slotId);
      await mkdir(slotDir, { recursive: true });
      const [port] = await ports.take(1);
      const record = await startServer(settings, { slotId, slotDir, port: port as number }, options);
      return {
        component: ctx.component,
        slot,
        version: ctx.spec.version,
        addresses: [`127.0.0.1:${record.port}`],
        details: { ...record },
      };
    },

    async replicate(ctx, from, to, options) {
      const deadline = Date.now() + (ctx.spec.replicate?.timeout ?? defaults.replicateTimeoutMs);
      await replication.follow(ctx, from, to, options);
      const info = parseInfo(
        await redis(portOf(from), ['INFO', 'replication'], {
          signal: options.signal,
          timeoutMs: callTimeoutMs,
        }),
      );
      await replication.catchUp(ctx, from, to, info.master_repl_offset ?? '0', deadline, options);
      await replication.promote(ctx, to, options);
      await replication.stop(ctx, from, to, options);
    },

    async drain() {
      // Clients leave with the traffic; the server serves until retired.
    },

    async retire(ctx, slot, options) {
      options.signal.throwIfAborted();
      const slotDir = slotDirOf(ctx, slot);
      await stopServer(slotDir, recordOf(slot) ?? (await readServer(slotDir)), options);
    },

    async observe(ctx, slot, options) {
      const record = recordOf(slot) ?? (await readServer(slotDirOf(ctx, slot)));
      if (!record)
        return [{ address: slot.addresses[0] ?? null, state: 'unknown', detail: 'no server recorded' }];
      const address = `127.0.0.1:${record.port}`;
      const seen = { address, pid: record.pid };
      if (!serverAlive(record)) return [{ ...seen, state: 'not_running', detail: 'exited' }];
      const probe = await tcpProbe(address).run(connectTimeoutMs, options.signal);
      if (!probe) return [{ ...seen, state: 'unknown', detail: 'observation stopped' }];
      if (probe.ok) return [{ ...seen, state: 'running' }];
      return [{ ...seen, state: 'not_answering', detail: probe.summary }];
    },

    async logs(ctx, slot, lines) {
      return [{ replica: 0, name: 'redis-server', lines: await logTail(slotDirOf(ctx, slot), lines) }];
    },

    replication,
  };
}
