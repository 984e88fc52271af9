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
import type { PortPool } from './port-pool.js';
import { parseInfo, redis } from './redis-client.js';
import { createRedisReplicator } from './redis-replicator.js';
import { callTimeoutMs, portOf, redisSettings, startServer, stopServer } from './redis-server.js';
import { createServerPerSlotDriver } from './server-slot.js';
import type { ComponentDriver } from './types.js';

export interface RedisDriverOptions {
  /** Where the servers' ports come from; share one with every driver that may provision at the same time. */
  ports?: PortPool;
}

export function createRedisDriver(driverOptions: RedisDriverOptions = {}): ComponentDriver {
  const replication = createRedisReplicator();
  return createServerPerSlotDriver({
    server: 'redis-server',
    recordFile: 'server.json',
    logFile: 'redis.log',
    ports: driverOptions.ports,
    settings: redisSettings,
    start: startServer,
    stop: (_settings, slotDir, known, options) => stopServer(slotDir, known, options),
    async position(_ctx, from, options) {
      const info = parseInfo(
        await redis(portOf(from), ['INFO', 'replication'], {
          signal: options.signal,
          timeoutMs: callTimeoutMs,
        }),
      );
      return info.master_repl_offset ?? '0';
    },
    replication,
  });
}
