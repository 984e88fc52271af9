/** The postgres Replicator's promote (postgres-replicator.ts): what makes a follower the primary. */
import { appAdmin } from './postgres-cluster.js';
import { unfenceRole } from './postgres-fence.js';
import { type PostgresSettings, superuser } from './postgres-settings.js';
import { type Connection, ident, literal, query, SqlError } from './postgres-sql.js';
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
  const self = appAdmin(settings, slot);
  const subscriptions: SubscriptionRow[] = (
    await query(
      self,
      `SELECT subname, subconninfo FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND subname LIKE 'cutover\\_%'`,
      options.signal,
    )
  ).map(([name = '', info = '']) => ({ name, conninfo: info }));
  const oldValues: Record<string, string> = {};
  for (const sub of subscriptions) {
    await query(self, `ALTER SUBSCRIPTION ${ident(sub.name)} DISABLE`, options.signal);
    const port = Number(/port=(\d+)/.exec(sub.conninfo)?.[1]);
    try {
      const rows = await query(
        { bin: settings.bin, port, database: settings.database, user: superuser },
        `SELECT format('%I.%I', schemaname, sequencename), last_value FROM pg_sequences WHERE last_value IS NOT NULL`,
        options.signal,
      );
      for (const [seq = '', value = ''] of rows) oldValues[seq] = value;
    } catch (error) {
      if (!(error instanceof SqlError) || !error.unreachable) throw error;
      options.log(
        `${ctx.component}: the old primary (port ${port}) is unreachable; sequences are set from the data alone`,
      );
    }
  }
  await setSequences(self, oldValues, options.signal);
  for (const sub of subscriptions) await dropSubscription(self, sub.name, options);
  await unfenceRole(settings, slot, options);
  options.log(
    `${ctx.component}: ${slot.slot} promoted (${subscriptions.length} subscription(s) dropped, sequences set)`,
  );
}

/**
 * Every sequence of the database set to at least the largest value of the column it belongs to
 * (serial or identity), its own last value and the old primary's, so the next value is past all.
 */
async function setSequences(conn: Connection, oldValues: Record<string, string>, signal: AbortSignal) {
  const old = literal(JSON.stringify(oldValues));
  await query(
    conn,
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
$cutover$;`,
    signal,
  );
}

/** Drops a subscription and its slot on the publisher; without the publisher, only the subscription. */
export async function dropSubscription(conn: Connection, name: string, options: DriverCallOptions) {
  try {
    await query(conn, `DROP SUBSCRIPTION IF EXISTS ${ident(name)}`, options.signal);
  } catch (error) {
    if (!(error instanceof SqlError) || error.unreachable) throw error;
    options.log(`dropping subscription ${name} without its publisher's slot (${error.message})`);
    await query(
      conn,
      `ALTER SUBSCRIPTION ${ident(name)} DISABLE;\nALTER SUBSCRIPTION ${ident(name)} SET (slot_name = NONE);\nDROP SUBSCRIPTION ${ident(name)};\n`,
      options.signal,
    );
  }
}
