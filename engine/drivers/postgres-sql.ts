import { spawn } from 'node:child_process';
import path from 'node:path';
import { spawnFailure } from './spawn-failure.js';

/** How long a client waits for a connection before it fails (libpq's PGCONNECT_TIMEOUT, seconds). */
export const connectTimeoutSeconds = 5;

/**
 * One database of one cluster, reached over TCP on loopback with the client programs of `bin` (psql
 * for what runs once; a switch's calls use sessions of their own, postgres-session.ts).
 */
export interface Connection {
  bin: string;
  port: number;
  database: string;
  user: string;
}

/** A statement PostgreSQL refused (stderr's first ERROR/FATAL line), or a client that could not connect. */
export class SqlError extends Error {
  override readonly name = 'SqlError';
  constructor(
    message: string,
    /** The client could not reach the server at all (refused, timed out). */
    readonly unreachable: boolean,
  ) {
    super(message);
  }
}

/** Runs `args` of a client program (psql, pg_dump) of `conn`, with `input` on its stdin. */
export function runClient(
  conn: Connection,
  program: 'psql' | 'pg_dump',
  args: readonly string[],
  signal: AbortSignal,
  input?: string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(conn.bin, program), args, {
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      env: {
        ...process.env,
        PGHOST: '127.0.0.1',
        PGPORT: String(conn.port),
        PGUSER: conn.user,
        PGDATABASE: conn.database,
        PGCONNECT_TIMEOUT: String(connectTimeoutSeconds),
        PGAPPNAME: 'cutover',
      },
      signal,
    });
    let out = '';
    let err = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString('utf8');
    });
    child.on('error', (error) => {
      if (signal.aborted) return reject(signal.reason);
      reject(new SqlError(`${program} could not be started: ${spawnFailure(error)}`, false));
    });
    child.on('close', (code) => {
      if (code === 0) return resolve(out);
      if (signal.aborted) return reject(signal.reason);
      // The client's own connection failed (no ERROR from a server that answered).
      const unreachable =
        !/\bERROR:/.test(err) &&
        /connection to server|could not connect|Connection refused|timeout expired|the database system is (starting up|shutting down)/i.test(
          err,
        );
      const line =
        err.split('\n').find((l) => /\b(ERROR|FATAL):/.test(l)) ?? err.trim().split('\n').pop() ?? '';
      reject(
        new SqlError(
          `${program} on 127.0.0.1:${conn.port}/${conn.database}: ${line.replace(/^.*?\b(ERROR|FATAL):\s*/, '') || `exit ${code}`}`,
          unreachable,
        ),
      );
    });
    if (input !== undefined) {
      child.stdin?.on('error', () => {
        // The client exited before reading it all; its exit status says why.
      });
      child.stdin?.end(input);
    }
  });
}

/**
 * Runs `sql` (one or more statements, stopping at the first error) and returns the rows of the
 * last one's output, each a list of fields (text, '' for NULL).
 */
export async function query(conn: Connection, sql: string, signal: AbortSignal): Promise<string[][]> {
  const out = await runClient(
    conn,
    'psql',
    ['-X', '-q', '-A', '-t', '-F', '\t', '-v', 'ON_ERROR_STOP=1', '-f', '-'],
    signal,
    sql,
  );
  return out
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.split('\t'));
}

/** Runs one SQL statement and returns its rows (psql's, or a session's: postgres-session.ts). */
export type Sql = (statement: string) => Promise<string[][]>;

/** Each statement through a psql of its own (what runs once, outside the write hold). */
export function psqlOf(conn: Connection, signal: AbortSignal): Sql {
  return (statement) => query(conn, statement, signal);
}

/** The first field of the first row, or undefined without rows. */
export async function scalar(
  conn: Connection,
  sql: string,
  signal: AbortSignal,
): Promise<string | undefined> {
  return (await query(conn, sql, signal))[0]?.[0];
}

/** An SQL identifier, quoted. */
export function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** An SQL string literal. */
export function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}
