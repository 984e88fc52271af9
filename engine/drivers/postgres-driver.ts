/**
 * The postgres driver: a stateful component realised as a PostgreSQL cluster per slot, replicated
 * between slots with logical replication (postgres-replicator.ts).
 *
 * Contract (for its docs page, docs/drivers/postgres.md):
 *
 * - A slot is `<component>-<migrationId>` (`details.slotId`) in
 *   `<stateDir>/environments/<environment>/slots/<slotId>/`: `pgdata/` (the cluster, made with
 *   initdb), `postgres.log` (the server's output) and `cluster.json` (its port and pid).
 * - provision makes the cluster as the driver's `runAs` user (default: cutover's user, `postgres`
 *   when that is root: the server refuses root), starts the server detached on a free port of
 *   127.0.0.1 (TCP only, trust authentication from loopback, wal_level=logical), creates the role
 *   `user` (LOGIN) and its database `database`, and runs the `init` file as that role. The slot's
 *   address is `127.0.0.1:<port>`. Provisioning a slot again stops and removes what an earlier
 *   attempt left there.
 * - replicate (the one-time copy, for a runner without the switch): green follows blue, catches up
 *   with blue's position of the moment, then stops following (sequences set from the data).
 * - drain does nothing; retire stops the server (`pg_ctl stop -m fast`, its process group if that
 *   fails) and keeps the directory. Idempotent.
 * - observe: running (server alive, port accepting), not_answering, not_running.
 */
import type { PortPool } from './port-pool.js';
import { createCluster, portOf, stopCluster } from './postgres-cluster.js';
import { createPostgresReplicator } from './postgres-replicator.js';
import { postgresSettings } from './postgres-settings.js';
import { scalar } from './postgres-sql.js';
import { createServerPerSlotDriver } from './server-slot.js';
import type { ComponentDriver } from './types.js';

export interface PostgresDriverOptions {
  /** Where the servers' ports come from; share one with every driver that may provision at the same time. */
  ports?: PortPool;
}

export function createPostgresDriver(driverOptions: PostgresDriverOptions = {}): ComponentDriver {
  const replication = createPostgresReplicator();
  return createServerPerSlotDriver({
    server: 'postgres',
    recordFile: 'cluster.json',
    logFile: 'postgres.log',
    ports: driverOptions.ports,
    settings: postgresSettings,
    start: createCluster,
    stop: stopCluster,
    async position(ctx, from, options) {
      const settings = await postgresSettings(ctx);
      return (
        (await scalar(
          { bin: settings.bin, port: portOf(from), database: settings.database, user: 'postgres' },
          'SELECT pg_current_wal_lsn()',
          options.signal,
        )) ?? '0/0'
      );
    },
    replication,
  });
}
