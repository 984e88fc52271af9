/**
 * A session of the driver's own (node-postgres) with one database of one cluster, for what a switch
 * does inside the router's write hold: the fence's passes, the catch-up's and the lag's polls, the
 * promotion and the reverse subscription. One session serves every statement of a call, so a poll
 * costs a round trip on an open connection instead of a psql process and a new server backend
 * (about 25 ms each, every 20 ms, while every writer waits). What runs once from files keeps psql
 * (postgres-sql.ts): `init`, the schema pg_dump wrote.
 *
 * A session connects when it is opened and is closed by its owner (withSession), on success, error
 * or abort alike: no connection outlives the call. A connection lost on the way fails the statement
 * as `unreachable` (as psql's did) and the session's next statement connects again.
 */
import pg from 'pg';
import { type Connection, connectTimeoutSeconds, type Sql, SqlError } from './postgres-sql.js';

export interface Session {
  /**
   * Rows of one statement (not several, no psql meta-command), each a list of fields as psql -A
   * printed them: text, '' for NULL.
   */
  query: Sql;
  /** The first field of the first row, or undefined without rows. */
  scalar(statement: string): Promise<string | undefined>;
}

/** Every value as the text the server sent (as psql printed it): no type is parsed. */
const textTypes = { getTypeParser: () => (text: string) => text };

/** Runs `use` with a session to `conn`, closed when `use` ends (resolved, thrown or aborted). */
export async function withSession<T>(
  conn: Connection,
  signal: AbortSignal,
  use: (session: Session) => Promise<T>,
): Promise<T> {
  const where = `postgres on 127.0.0.1:${conn.port}/${conn.database}`;
  let current: { client: pg.Client; ready: Promise<unknown> } | undefined;
  const open = (): { client: pg.Client; ready: Promise<unknown> } => {
    const client = new pg.Client({
      host: '127.0.0.1',
      port: conn.port,
      user: conn.user,
      database: conn.database,
      application_name: 'cutover',
      connectionTimeoutMillis: connectTimeoutSeconds * 1000,
      ssl: false,
      types: textTypes,
    });
    // A connection lost while idle: the next statement connects again (unheard, it would end the process).
    client.on('error', () => {
      if (current?.client === client) current = undefined;
    });
    const ready = client.connect();
    ready.catch(() => {});
    const opened = { client, ready };
    current = opened;
    return opened;
  };
  const drop = async () => {
    const ending = current?.client;
    current = undefined;
    await ending?.end().catch(() => {});
  };
  // An abort ends the connection at once (a statement in flight with it); the call rejects with its reason.
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => {
      reject(signal.reason);
      void drop();
    };
  });
  aborted.catch(() => {});
  signal.throwIfAborted();
  signal.addEventListener('abort', onAbort, { once: true });

  const query: Sql = async (statement) => {
    signal.throwIfAborted();
    let connected = false;
    try {
      const { client, ready } = current ?? open();
      await Promise.race([ready, aborted]);
      connected = true;
      const result = await Promise.race([client.query({ text: statement, rowMode: 'array' }), aborted]);
      return (result.rows as unknown[][]).map((row) => row.map((v) => (v === null ? '' : String(v))));
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      const lost = !connected || !refusedStatement(error);
      if (lost) await drop();
      throw new SqlError(`${where}: ${(error as Error).message}`, lost);
    }
  };
  try {
    open();
    return await use({ query, scalar: async (statement) => (await query(statement))[0]?.[0] });
  } finally {
    signal.removeEventListener('abort', onAbort);
    await drop();
  }
}

/**
 * An ERROR the server answered to a statement, the session going on: not a connection that could
 * not be made or was lost (a FATAL such as the server shutting down or the session terminated, or
 * the socket closed), which psql reported as a connection to the server that failed.
 */
function refusedStatement(error: unknown): boolean {
  return error instanceof pg.DatabaseError && error.severity === 'ERROR';
}
