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
import { mkdir } from 'node:fs/promises';
import { defaults } from '../../core/topology/types.js';
import { tcpProbe } from '../health/probes.js';
import { PortPool } from './port-pool.js';
import {
  type ClusterRecord,
  clusterAlive,
  createCluster,
  logTail,
  portOf,
  readCluster,
  stopCluster,
} from './postgres-cluster.js';
import { createPostgresReplicator } from './postgres-replicator.js';
import { postgresSettings } from './postgres-settings.js';
import { scalar } from './postgres-sql.js';
import type { ComponentCallContext, ComponentDriver, SlotInfo } from './types.js';

/** A server's port that does not accept a connection within this is `not_answering`. */
const connectTimeoutMs = 1_000;

export interface PostgresDriverOptions {
  /** Where the servers' ports come from; share one with every driver that may provision at the same time. */
  ports?: PortPool;
}

export function createPostgresDriver(driverOptions: PostgresDriverOptions = {}): ComponentDriver {
  const ports = driverOptions.ports ?? new PortPool();
  const replication = createPostgresReplicator();
  return {
    async provision(ctx, slot, options) {
      options.signal.throwIfAborted();
      const settings = await postgresSettings(ctx);
      const slotId = `${ctx.component}-${ctx.migrationId}`;
      const slotDir = ctx.stateDir.slotDir(ctx.environment, slotId);
      await mkdir(slotDir, { recursive: true });
      const [port] = await ports.take(1);
      const record = await createCluster(settings, { slotId, slotDir, port: port as number }, options);
      return {
        component: ctx.component,
        slot,
        version: ctx.spec.version,
        addresses: [`127.0.0.1:${record.port}`],
        details: { ...record },
      };
    },

    async replicate(ctx, from, to, options) {
      const timeoutMs = ctx.spec.replicate?.timeout ?? defaults.replicateTimeoutMs;
      const deadline = Date.now() + timeoutMs;
      await replication.follow(ctx, from, to, options);
      const settings = await postgresSettings(ctx);
      const position =
        (await scalar(
          { bin: settings.bin, port: portOf(from), database: settings.database, user: 'postgres' },
          'SELECT pg_current_wal_lsn()',
          options.signal,
        )) ?? '0/0';
      await replication.catchUp(ctx, from, to, position, deadline, options);
      await replication.promote(ctx, to, options);
      await replication.stop(ctx, from, to, options);
    },

    async drain() {
      // Clients leave with the traffic; the server serves until retired.
    },

    async retire(ctx, slot, options) {
      options.signal.throwIfAborted();
      const slotDir = slotDirOf(ctx, slot);
      const settings = await postgresSettings(ctx);
      await stopCluster(settings, slotDir, recordOf(slot) ?? (await readCluster(slotDir)), options);
    },

    async observe(ctx, slot, options) {
      const record = recordOf(slot) ?? (await readCluster(slotDirOf(ctx, slot)));
      if (!record)
        return [{ address: slot.addresses[0] ?? null, state: 'unknown', detail: 'no cluster recorded' }];
      const address = `127.0.0.1:${record.port}`;
      const seen = { address, pid: record.pid };
      if (!clusterAlive(record)) return [{ ...seen, state: 'not_running', detail: 'exited' }];
      const probe = await tcpProbe(address).run(connectTimeoutMs, options.signal);
      if (!probe) return [{ ...seen, state: 'unknown', detail: 'observation stopped' }];
      if (probe.ok) return [{ ...seen, state: 'running' }];
      return [{ ...seen, state: 'not_answering', detail: probe.summary }];
    },

    async logs(ctx, slot, lines) {
      return [{ replica: 0, name: 'postgres', lines: await logTail(slotDirOf(ctx, slot), lines) }];
    },

    replication,
  };
}

function slotDirOf(ctx: ComponentCallContext, slot: SlotInfo): string {
  const recorded = slot.details?.slotDir;
  if (typeof recorded === 'string') return recorded;
  return ctx.stateDir.slotDir(
    ctx.environment,
    String(slot.details?.slotId ?? `${slot.component}-${ctx.migrationId}`),
  );
}

function recordOf(slot: SlotInfo): ClusterRecord | undefined {
  const d = slot.details;
  if (!d || typeof d.pid !== 'number' || typeof d.port !== 'number' || typeof d.slotDir !== 'string')
    return undefined;
  return d as unknown as ClusterRecord;
}
