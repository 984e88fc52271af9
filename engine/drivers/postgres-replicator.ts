/**
 * The postgres driver's Replicator (types.ts): PostgreSQL's logical replication between the
 * clusters of two slots.
 *
 * - follow: `to`'s application database is made anew with `from`'s schema (pg_dump --schema-only),
 *   `from` gets the publication `cutover_pub` FOR ALL TABLES, and `to` a subscription to it with
 *   copy_data = true. The subscription's (and its replication slot's) name is derived from the two
 *   slot ids, so a call again finds it and leaves it. The application role is read-only on `to`
 *   (fenced) until promote.
 * - lag: bytes are `from`'s pg_current_wal_lsn() less the least confirmed_flush_lsn of the
 *   subscription's replication slots (what the follower applied and flushed: an idle follower
 *   confirms what it received, so an idle source's own WAL does not count as lag once reported,
 *   within a second), its tables' initial copies' slots included: while a table is being copied the
 *   subscription's own slot confirms that table's changes without applying them (the copy will).
 *   ms is how long ago the last transaction the follower applied was committed on the source (its
 *   commit timestamp, kept by track_commit_timestamp), 0 when caught up; unknown (null) while a
 *   table's initial copy runs (one transaction: none of it is applied until it ends) or when the
 *   follower's last commit is its own (not replicated).
 * - catchUp: `to` has applied a position once the subscription's slot confirmed it and every table
 *   finished its initial copy.
 * - fence: the application role gets default_transaction_read_only; every session of it that began
 *   before the fence and holds no write transaction is terminated; sessions with one are waited
 *   for. Other roles (the superuser, the replication workers) are not fenced.
 * - promote: the subscriptions into the slot are dropped and every sequence is set from the data
 *   (the largest value of the column it belongs to, its own and the old primary's last value):
 *   logical replication does not carry sequences. The slot is unfenced.
 * - reverse: a publication on the new primary, a subscription on the old one with copy_data = false.
 *   It must be made before the new primary takes writes (the switch holds them until then).
 * - stop: the subscription into `to` and its replication slot on `from`; a slot the other direction
 *   left without its subscription; a side's publication once no cutover slot is left there. The
 *   other direction, while it runs, is left alone.
 *
 * Not replicated: DDL (a schema change during a migration stops replication of that table) and
 * large objects.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { adminConnection, appAdmin, portOf } from './postgres-cluster.js';
import { fencePollMs, fenceRole, markRoleFenced, unfenceRole } from './postgres-fence.js';
import { dropSubscription, promoteSlot } from './postgres-promote.js';
import { type Session, withSession } from './postgres-session.js';
import { type PostgresSettings, postgresSettings, superuser } from './postgres-settings.js';
import { ident, literal, psqlOf, query, runClient, type Sql, SqlError } from './postgres-sql.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type ReplicationLag,
  type Replicator,
  type SlotInfo,
} from './types.js';

const publication = 'cutover_pub';
const pollMs = 100;
/** How long a replication slot may stay in use by a departing walsender before it is terminated. */
const slotReleaseMs = 5_000;

function slotIdOf(slot: SlotInfo): string {
  return String(slot.details?.slotId ?? `${slot.component}-${slot.slot}`);
}

/** The subscription (and replication slot) that carries `from` into `to`: at most 63 characters. */
export function subscriptionName(from: SlotInfo, to: SlotInfo): string {
  const digest = createHash('sha256')
    .update(`${slotIdOf(from)}>${slotIdOf(to)}`)
    .digest('hex');
  return `cutover_${digest.slice(0, 16)}`;
}

function conninfo(settings: PostgresSettings, slot: SlotInfo): string {
  return `host=127.0.0.1 port=${portOf(slot)} dbname=${settings.database} user=${superuser}`;
}

export function createPostgresReplicator(): Replicator {
  return {
    capabilities: { follow: true, lag: true, fence: true, reverse: true },

    async follow(ctx, from, to, options) {
      const settings = await postgresSettings(ctx);
      const name = subscriptionName(from, to);
      const target = psqlOf(appAdmin(settings, to), options.signal);
      if (await subscriptionExists(target, name)) {
        options.log(`${ctx.component}: ${to.slot} already follows ${from.slot} (${name})`);
        return;
      }
      const source = psqlOf(appAdmin(settings, from), options.signal);
      await checkReplicaIdentity(source, from);
      await ensurePublication(source);
      // Green's application may run already (its start, the gate, a preview request): what it
      // wrote there before the promotion would be acknowledged, then not carried back by a
      // rollback (reverse replication starts at the promotion), and could break the replication.
      // Its role is read-only there until promote unfences it, as a Redis replica is; the
      // database made anew just after ends the sessions it had.
      await markRoleFenced(psqlOf(adminConnection(settings, portOf(to)), options.signal), settings);
      await copySchema(settings, from, to, options);
      await dropSlot(source, name, options.signal);
      await target(
        `CREATE SUBSCRIPTION ${ident(name)} CONNECTION ${literal(conninfo(settings, from))} PUBLICATION ${publication} WITH (copy_data = true)`,
      );
      options.log(`${ctx.component}: ${to.slot} follows ${from.slot} (subscription ${name}, initial copy)`);
    },

    async lag(ctx, from, to, options) {
      const settings = await postgresSettings(ctx);
      return withBoth(settings, from, to, options.signal, (source, target) =>
        measureLag(source, target, from, to),
      );
    },

    async fence(ctx, slot, deadline, options) {
      const settings = await postgresSettings(ctx);
      return fenceRole(ctx, settings, slot, deadline, options);
    },

    async unfence(ctx, slot, options) {
      const settings = await postgresSettings(ctx);
      await withSession(adminConnection(settings, portOf(slot)), options.signal, (session) =>
        unfenceRole(session, settings, slot, options),
      );
    },

    async catchUp(ctx, from, to, position, deadline, options) {
      const settings = await postgresSettings(ctx);
      const name = subscriptionName(from, to);
      // A session on each side for every poll (a poll every 20 ms while the writes are held).
      return withBoth(settings, from, to, options.signal, async (source, target) => {
        for (;;) {
          const row = (
            await source.query(
              `SELECT confirmed_flush_lsn, pg_wal_lsn_diff(${literal(position)}::pg_lsn, confirmed_flush_lsn) FROM pg_replication_slots WHERE slot_name = ${literal(name)}`,
            )
          )[0];
          if (!row)
            throw new PermanentDriverError(
              `${to.slot} of ${ctx.component} does not follow ${from.slot}: no replication slot ${name}`,
            );
          const behind = Number(row[1]);
          const copying = Number(
            (await target.scalar(
              `SELECT (SELECT count(*) FROM pg_subscription_rel r WHERE r.srsubid = s.oid AND r.srsubstate <> 'r') FROM pg_subscription s WHERE s.subname = ${literal(name)}`,
            )) ?? 0,
          );
          if (row[0] !== '' && behind <= 0 && copying === 0) return measureLag(source, target, from, to);
          if (Date.now() >= deadline) {
            const lag = await measureLag(source, target, from, to);
            const errors = await target.scalar(
              `SELECT apply_error_count FROM pg_stat_subscription_stats WHERE subname = ${literal(name)}`,
            );
            const failing =
              Number(errors ?? 0) > 0
                ? `; its subscription failed to apply ${errors} time(s), see its postgres.log`
                : '';
            throw new PermanentDriverError(
              `${to.slot} of ${ctx.component} did not apply ${from.slot}'s position ${position} in time: ${row[0] === '' ? 'nothing confirmed yet' : `applied ${row[0]}, ${Math.max(0, behind)} bytes short`}${copying > 0 ? `, the initial copy of ${copying} table(s) still running` : ''} (lag ${lag.bytes} bytes, ${lag.ms ?? '?'} ms)${failing}`,
            );
          }
          await sleep(fencePollMs, undefined, { signal: options.signal });
        }
      });
    },

    async promote(ctx, slot, options) {
      const settings = await postgresSettings(ctx);
      await promoteSlot(ctx, settings, slot, options);
    },

    async reverse(ctx, from, to, options) {
      const settings = await postgresSettings(ctx);
      const name = subscriptionName(from, to);
      // Inside the write hold: a session on each side for all of it.
      const made = await withBoth(settings, from, to, options.signal, async (source, target) => {
        if (await subscriptionExists(target.query, name)) return false;
        await ensurePublication(source.query);
        await dropSlot(source.query, name, options.signal);
        await target.query(
          `CREATE SUBSCRIPTION ${ident(name)} CONNECTION ${literal(conninfo(settings, from))} PUBLICATION ${publication} WITH (copy_data = false)`,
        );
        return true;
      });
      if (!made) return;
      options.log(`${ctx.component}: ${to.slot} follows ${from.slot} back (subscription ${name}, no copy)`);
    },

    async stop(ctx, from, to, options) {
      const settings = await postgresSettings(ctx);
      await stopBetween(ctx, settings, from, to, options);
    },
  };
}

/** Sessions to the application database of `from` and of `to`, connecting at once, for `use`. */
function withBoth<T>(
  settings: PostgresSettings,
  from: SlotInfo,
  to: SlotInfo,
  signal: AbortSignal,
  use: (source: Session, target: Session) => Promise<T>,
): Promise<T> {
  return withSession(appAdmin(settings, from), signal, (source) =>
    withSession(appAdmin(settings, to), signal, (target) => use(source, target)),
  );
}

async function subscriptionExists(sql: Sql, name: string): Promise<boolean> {
  return (await sql(`SELECT count(*) FROM pg_subscription WHERE subname = ${literal(name)}`))[0]?.[0] !== '0';
}

/**
 * A table without a primary key (or another replica identity) cannot be published FOR ALL TABLES
 * without breaking the application: PostgreSQL then refuses its UPDATEs and DELETEs on the source.
 * Refused before anything is made, naming the tables.
 */
async function checkReplicaIdentity(sql: Sql, slot: SlotInfo): Promise<void> {
  const tables = await sql(
    `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
        AND (c.relreplident = 'n' OR (c.relreplident = 'd' AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)))
      ORDER BY 1`,
  );
  if (tables.length === 0) return;
  const names = tables.map(([name]) => name).join(', ');
  throw new PermanentDriverError(
    `${slot.component}'s tables ${names} have no primary key or replica identity, so replicating them would make PostgreSQL refuse their UPDATEs and DELETEs on ${slot.slot}: add a primary key, or ALTER TABLE … REPLICA IDENTITY FULL`,
  );
}

async function ensurePublication(sql: Sql): Promise<void> {
  const [[exists] = []] = await sql(
    `SELECT count(*) FROM pg_publication WHERE pubname = ${literal(publication)}`,
  );
  if (exists === '0') await sql(`CREATE PUBLICATION ${publication} FOR ALL TABLES`);
}

/**
 * `to`'s application database made anew from `from`'s schema (what `init` made in `to` is
 * replaced: the live database's schema is the one that counts).
 */
async function copySchema(
  settings: PostgresSettings,
  from: SlotInfo,
  to: SlotInfo,
  options: DriverCallOptions,
) {
  const db = settings.database;
  const schema = await runClient(
    appAdmin(settings, from),
    'pg_dump',
    ['--schema-only', '--no-publications', '--no-subscriptions'],
    options.signal,
  );
  await query(
    adminConnection(settings, portOf(to)),
    `DROP DATABASE IF EXISTS ${ident(db)} WITH (FORCE);\nCREATE DATABASE ${ident(db)} OWNER ${ident(settings.user)};\n`,
    options.signal,
  );
  await query(appAdmin(settings, to), schema, options.signal);
  options.log(`copied the schema of ${from.slot}'s ${db} into ${to.slot}`);
}

/** Drops a replication slot an earlier attempt left (waiting for a departing walsender to let go). */
async function dropSlot(sql: Sql, name: string, signal: AbortSignal): Promise<void> {
  const until = Date.now() + slotReleaseMs;
  for (;;) {
    const row = (
      await sql(
        `SELECT active, coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = ${literal(name)}`,
      )
    )[0];
    if (!row) return;
    if (row[0] === 'f') {
      await sql(
        `SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots WHERE slot_name = ${literal(name)} AND NOT active`,
      );
      continue;
    }
    if (Date.now() >= until) await sql(`SELECT pg_terminate_backend(${Number(row[1])})`);
    await sleep(pollMs, undefined, { signal });
  }
}

async function measureLag(
  atFrom: Session,
  atTo: Session,
  from: SlotInfo,
  to: SlotInfo,
): Promise<ReplicationLag> {
  const name = subscriptionName(from, to);
  const lastCommitUs = `coalesce((extract(epoch FROM (pg_last_committed_xact()).timestamp) * 1000000)::bigint::text, '')`;
  // The source first (what it wrote, then what each slot confirmed), the follower after: a
  // position the follower confirms in between is not lag.
  const row = (
    await atFrom.query(
      `SELECT pg_current_wal_lsn(), coalesce(confirmed_flush_lsn::text, ''), coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0), ${lastCommitUs},
              coalesce((SELECT string_agg(concat_ws(' ', s.slot_name, coalesce(s.confirmed_flush_lsn, s.restart_lsn, '0/0'), coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), coalesce(s.confirmed_flush_lsn, s.restart_lsn)), 0)), ',') FROM pg_replication_slots s WHERE s.slot_name LIKE 'pg\\_%\\_sync\\_%'), '')
         FROM pg_replication_slots WHERE slot_name = ${literal(name)}`,
    )
  )[0];
  if (!row)
    throw new PermanentDriverError(
      `${to.slot} of ${to.component} does not follow ${from.slot}: no replication slot ${name}`,
    );
  const [source = '', applied = '', diff = '0', sourceCommitUs = '', syncSlots = ''] = row;
  // A follower keeps the source's commit timestamps (track_commit_timestamp): its last committed
  // transaction is the last one it applied, when it came by replication (a replication origin).
  const [oid = '', copyingText = '0', followerCommitUs = '', sinceMs = ''] =
    (
      await atTo.query(
        `SELECT coalesce((SELECT oid::text FROM pg_subscription WHERE subname = ${literal(name)}), ''),
                (SELECT count(*) FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid WHERE s.subname = ${literal(name)} AND r.srsubstate <> 'r'),
                CASE WHEN (pg_last_committed_xact()).roident <> 0 THEN ${lastCommitUs} ELSE '' END,
                CASE WHEN (pg_last_committed_xact()).roident <> 0 THEN coalesce(round(extract(epoch FROM clock_timestamp() - (pg_last_committed_xact()).timestamp) * 1000)::text, '') ELSE '' END`,
      )
    )[0] ?? [];
  const copying = Number(copyingText);
  // A table being copied: the subscription's slot confirms its changes without applying them (the
  // copy will, from its own slot, pg_<subscription oid>_sync_…): what that slot has not confirmed is lag.
  let least = { applied: applied || '0/0', bytes: Math.max(0, Number(diff)) };
  for (const entry of syncSlots.split(',')) {
    const [slot = '', confirmed = '', behind = '0'] = entry.split(' ');
    if (oid !== '' && slot.startsWith(`pg_${oid}_sync_`) && Number(behind) > least.bytes)
      least = { applied: confirmed, bytes: Number(behind) };
  }
  const bytes = Math.max(least.bytes, copying > 0 ? 1 : 0);
  return {
    source,
    applied: least.applied,
    bytes,
    ms: copying > 0 ? null : lagMs(bytes, sourceCommitUs, followerCommitUs, sinceMs),
  };
}

/**
 * How long ago the follower's last applied transaction was committed on the source: 0 when caught
 * up, or when the source committed nothing since (its WAL moved for other reasons, e.g. a
 * checkpoint, which the follower confirms within a second); null when the follower applied nothing
 * (or its last commit was its own).
 */
function lagMs(
  bytes: number,
  sourceCommitUs: string,
  followerCommitUs: string,
  sinceMs: string,
): number | null {
  if (bytes === 0) return 0;
  if (sourceCommitUs !== '' && followerCommitUs !== '' && Number(followerCommitUs) >= Number(sourceCommitUs))
    return 0;
  return sinceMs === '' ? null : Math.max(0, Number(sinceMs));
}

/**
 * Ends replication into `to` from `from`: the subscription on `to` and its replication slot on
 * `from`. What no replication uses any more goes too: a slot of the other direction whose
 * subscription is gone (an orphan keeps WAL forever), and on each side the publication once no
 * cutover slot is left there. The other direction, while it runs, is left alone. A side that is no
 * longer reachable (a retired slot) is skipped, not both.
 */
async function stopBetween(
  ctx: ComponentCallContext,
  settings: PostgresSettings,
  from: SlotInfo,
  to: SlotInfo,
  options: DriverCallOptions,
) {
  const name = subscriptionName(from, to);
  const back = subscriptionName(to, from);
  const reach = async (side: SlotInfo, step: (sql: Sql) => Promise<void>): Promise<boolean> => {
    try {
      await step(psqlOf(appAdmin(settings, side), options.signal));
      return true;
    } catch (error) {
      if (!(error instanceof SqlError) || !error.unreachable) throw error;
      options.log(
        `${ctx.component}: ${side.slot} is unreachable; its side of the replication is left (${error.message})`,
      );
      return false;
    }
  };
  let backFollows = true;
  const toReached = await reach(to, (sql) => dropSubscription(sql, name, options));
  const fromReached = await reach(from, async (sql) => {
    await dropSlot(sql, name, options.signal);
    backFollows = await subscriptionExists(sql, back);
  });
  if (!toReached && !fromReached)
    throw new Error(`neither ${from.slot} nor ${to.slot} of ${ctx.component} is reachable`);
  // `from` follows `to` no more (or never did): a slot `to` keeps for it is an orphan.
  if (fromReached && !backFollows) await reach(to, (sql) => dropSlot(sql, back, options.signal));
  for (const side of [from, to]) {
    await reach(side, async (sql) => {
      const [[slots] = []] = await sql(
        `SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'cutover\\_%'`,
      );
      if (slots === '0') await sql(`DROP PUBLICATION IF EXISTS ${publication}`);
    });
  }
  options.log(`${ctx.component}: replication of ${from.slot} into ${to.slot} stopped and dropped`);
}
