/** The postgres Replicator's fence and unfence (postgres-replicator.ts) of the application role. */
import { setTimeout as sleep } from 'node:timers/promises';
import { adminConnection, portOf } from './postgres-cluster.js';
import { type Session, withSession } from './postgres-session.js';
import type { PostgresSettings } from './postgres-settings.js';
import { ident, literal, type Sql } from './postgres-sql.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from './types.js';

/** A fence runs inside the router's write hold: it looks again often. */
export const fencePollMs = 20;
/** How much of a query pg_stat_activity shows that a fence failure quotes. */
const quotedQueryChars = 200;

/** The role settings that fence the application role, and when it was fenced (the DB's clock). */
const fencedAtSetting = 'cutover.fenced_at';

export async function fenceRole(
  ctx: ComponentCallContext,
  settings: PostgresSettings,
  slot: SlotInfo,
  deadline: number,
  options: DriverCallOptions,
): Promise<{ position: string }> {
  const admin = adminConnection(settings, portOf(slot));
  // One session for the setting and every pass (a pass every 20 ms while the writes are held).
  return withSession(admin, options.signal, async (session) => {
    const fencedAt = await markRoleFenced(session.query, settings);
    const before = `usename = ${literal(settings.user)} AND backend_start < ${literal(fencedAt)}::timestamptz AND pid <> pg_backend_pid()`;
    // Each pass, in this order (each statement a transaction of its own, so each reads
    // pg_stat_activity afresh): end the sessions from before the fence that hold no write, list
    // those still there, then read the position (after the list, so after every write of a
    // session it no longer shows).
    for (;;) {
      await session.query(
        `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE ${before} AND backend_xid IS NULL`,
      );
      const left = await session.query(
        `SELECT pid, coalesce(backend_xid::text, ''), coalesce(round(extract(epoch FROM clock_timestamp() - xact_start) * 1000)::text, ''), replace(replace(left(query, ${quotedQueryChars}), E'\\n', ' '), E'\\t', ' ') FROM pg_stat_activity WHERE ${before} ORDER BY xact_start`,
      );
      if (left.length === 0) {
        const position = (await session.scalar('SELECT pg_current_wal_lsn()')) ?? '';
        options.log(`${ctx.component}: ${slot.slot} fenced (${settings.user} read-only) at ${position}`);
        return { position };
      }
      const writing = left.find((w) => w[1] !== '');
      if (writing && Date.now() >= deadline) {
        await unfenceRole(session, settings, slot, options);
        const [pid, xid, openMs, text] = writing;
        throw new PermanentDriverError(
          `${ctx.component}'s ${slot.slot} could not be fenced: a write transaction of ${settings.user} is still open (pid ${pid}, xid ${xid}, open ${(Number(openMs) / 1000).toFixed(1)}s, query: ${text}); the fence is lifted`,
        );
      }
      await sleep(fencePollMs, undefined, { signal: options.signal });
    }
  });
}

/**
 * The application role is read-only in new sessions of the cluster `sql` reaches, from the time
 * returned (the cluster's clock), which unfenceRole reads to end the sessions begun while fenced.
 * The time is read after the setting is committed: a session that began before it may have read
 * the role's settings before the fence; one that began after cannot have.
 */
export async function markRoleFenced(sql: Sql, settings: PostgresSettings): Promise<string> {
  const role = ident(settings.user);
  await sql(`ALTER ROLE ${role} SET default_transaction_read_only = on`);
  const fencedAt = (await sql('SELECT clock_timestamp()'))[0]?.[0] ?? '';
  await sql(`ALTER ROLE ${role} SET ${fencedAtSetting} = ${literal(fencedAt)}`);
  return fencedAt;
}

/**
 * Lifts the fence of the cluster `session` is connected to (any of its databases: a role and
 * pg_stat_activity are the cluster's).
 */
export async function unfenceRole(
  session: Session,
  settings: PostgresSettings,
  slot: SlotInfo,
  options: DriverCallOptions,
) {
  const role = ident(settings.user);
  const fencedAt = await session.scalar(
    `SELECT substr(c, ${fencedAtSetting.length + 2}) FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole, unnest(s.setconfig) c WHERE r.rolname = ${literal(settings.user)} AND s.setdatabase = 0 AND c LIKE ${literal(`${fencedAtSetting}=%`)}`,
  );
  await session.query(`ALTER ROLE ${role} RESET default_transaction_read_only`);
  if (fencedAt === undefined) return;
  // Sessions that began while fenced stay read-only for their lifetime: end those that hold no write
  // (they cannot), so the application's next connection writes again.
  await session.query(
    `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = ${literal(settings.user)} AND backend_start >= ${literal(fencedAt)}::timestamptz AND backend_xid IS NULL AND pid <> pg_backend_pid()`,
  );
  await session.query(`ALTER ROLE ${role} RESET ${fencedAtSetting}`);
  options.log(`${slot.component}: ${slot.slot} unfenced (${settings.user} writes again)`);
}
