/** The postgres Replicator's promote (postgres-replicator.ts): what makes a follower the primary. */
import { appAdmin } from './postgres-cluster.js';
import { unfenceRole } from './postgres-fence.js';
import { withSession } from './postgres-session.js';
import { type PostgresSettings, superuser } from './postgres-settings.js';
import { ident, literal, type Sql, SqlError } from './postgres-sql.js';
import type { ComponentCallContext, DriverCallOptions, SlotInfo } from './types.js';

interface SubscriptionRow {
  name: string;
  conninfo: string;
}

/**
 * `slot` becomes the primary: its cutover subscriptions are disabled, its sequences set from the
 * data and from the old primaries' values (read through each subscription's connection), the
 * subscriptions dropped, and the application role unfenced.
 */
export async function promoteSlot(
  ctx: ComponentCallContext,
  settings: PostgresSettings,
  slot: SlotInfo,
  options: DriverCallOptions,
) {
  // One session for all of it (it runs inside the write hold), the unfence included: a role and
  // pg_stat_activity are the cluster's, whatever the database.
  await withSession(appAdmin(settings, slot), options.signal, async (self) => {
    const subscriptions: SubscriptionRow[] = (
      await self.query(
        `SELECT subname, subconninfo FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND subname LIKE 'cutover\\_%'`,
      )
    ).map(([name = '', info = '']) => ({ name, conninfo: info }));
    const oldValues: Record<string, string> = {};
    for (const sub of subscriptions) {
      await self.query(`ALTER SUBSCRIPTION ${ident(sub.name)} DISABLE`);
      const port = Number(/port=(\d+)/.exec(sub.conninfo)?.[1]);
      try {
        const rows = await withSession(
          { bin: settings.bin, port, database: settings.database, user: superuser },
          options.signal,
          (old) =>
            old.query(
              `SELECT format('%I.%I', schemaname, sequencename), last_value FROM pg_sequences WHERE last_value IS NOT NULL`,
            ),
        );
        for (const [seq = '', value = ''] of rows) oldValues[seq] = value;
      } catch (error) {
        if (!(error instanceof SqlError) || !error.unreachable) throw error;
        options.log(
          `${ctx.component}: the old primary (port ${port}) is unreachable; sequences are set from the data alone`,
        );
      }
    }
    await setSequences(self.query, oldValues);
    for (const sub of subscriptions) await dropSubscription(self.query, sub.name, options);
    await unfenceRole(self, settings, slot, options);
    options.log(
      `${ctx.component}: ${slot.slot} promoted (${subscriptions.length} subscription(s) dropped, sequences set)`,
    );
  });
}

/**
 * Every sequence of the database set to at least the largest value of the column it belongs to
 * (serial or identity), its own last value and the old primary's, so the next value is past all.
 */
async function setSequences(sql: Sql, oldValues: Record<string, string>) {
  const old = literal(JSON.stringify(oldValues));
  await sql(
    `DO $cutover$
DECLARE
  s record;
  top numeric;
  old jsonb := ${old}::jsonb;
BEGIN
  FOR s IN
    SELECT format('%I.%I', sn.nspname, sc.relname) AS seq, sq.last_value AS own,
           format('%I.%I', tn.nspname, t.relname) AS tbl, a.attname AS col
      FROM pg_class sc
      JOIN pg_namespace sn ON sn.oid = sc.relnamespace
      JOIN pg_sequences sq ON sq.schemaname = sn.nspname AND sq.sequencename = sc.relname
      LEFT JOIN pg_depend d ON d.objid = sc.oid AND d.classid = 'pg_class'::regclass
        AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
      LEFT JOIN pg_class t ON t.oid = d.refobjid
      LEFT JOIN pg_namespace tn ON tn.oid = t.relnamespace
      LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
     WHERE sc.relkind = 'S'
  LOOP
    top := NULL;
    IF s.col IS NOT NULL THEN
      EXECUTE format('SELECT max(%I)::numeric FROM %s', s.col, s.tbl) INTO top;
    END IF;
    top := greatest(top, s.own::numeric, (old ->> s.seq)::numeric);
    IF top IS NOT NULL THEN
      PERFORM setval(s.seq::regclass, top::bigint, true);
    END IF;
  END LOOP;
END
$cutover$`,
  );
}

/** Drops a subscription and its slot on the publisher; without the publisher, only the subscription. */
export async function dropSubscription(sql: Sql, name: string, options: DriverCallOptions) {
  try {
    await sql(`DROP SUBSCRIPTION IF EXISTS ${ident(name)}`);
  } catch (error) {
    if (!(error instanceof SqlError) || error.unreachable) throw error;
    options.log(`dropping subscription ${name} without its publisher's slot (${error.message})`);
    await sql(`ALTER SUBSCRIPTION ${ident(name)} DISABLE`);
    await sql(`ALTER SUBSCRIPTION ${ident(name)} SET (slot_name = NONE)`);
    await sql(`DROP SUBSCRIPTION ${ident(name)}`);
  }
}
