import { spawn } from 'node:child_process';
import { appendFile, chown, mkdir, open, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { environmentCause } from '../../core/errors.js';
import { isAlive, type ProcessIdentity, processIdentity } from '../../platform/process-identity.js';
import type { OsUser, PostgresSettings } from './postgres-settings.js';
import { superuser } from './postgres-settings.js';
import { type Connection, ident, query, SqlError } from './postgres-sql.js';
import { stopProcessGroup } from './process-group.js';
import {
  logTail,
  readRecord,
  type ServerSlotRecord,
  serverAlive,
  portOf as slotPort,
} from './server-slot.js';
import { spawnFailure } from './spawn-failure.js';
import { type DriverCallOptions, PermanentDriverError, type SlotInfo } from './types.js';

/** How long a new server may take to accept connections. */
const startTimeoutMs = 60_000;
/** How long `pg_ctl stop -m fast` may take before the process group is killed. */
const stopTimeoutSeconds = 30;
/** After SIGTERM to the server's group (pg_ctl failed), the time before SIGKILL. */
const killGraceMs = 10_000;
const readyPollMs = 100;

/**
 * The server settings every slot's cluster gets (appended to its postgresql.conf, so a server
 * started by hand runs the same): loopback TCP only (no Unix socket: its path would be too long
 * under a state directory), logical decoding, room for the replication of both directions, and the
 * follower's progress reported each second so that a fence's catch-up is seen quickly, and commit
 * timestamps kept (a follower keeps the source's: how its lag in time is measured).
 */
function serverConfig(port: number): string {
  return [
    '',
    '# cutover postgres driver',
    "listen_addresses = '127.0.0.1'",
    `port = ${port}`,
    "unix_socket_directories = ''",
    'wal_level = logical',
    'max_replication_slots = 16',
    'max_wal_senders = 16',
    'max_logical_replication_workers = 8',
    'max_worker_processes = 16',
    'wal_receiver_status_interval = 1s',
    'wal_writer_delay = 10ms',
    'track_commit_timestamp = on',
    'shared_buffers = 32MB',
    '',
  ].join('\n');
}

/** What the driver keeps of a slot's cluster (in SlotInfo.details and `<slotDir>/cluster.json`). */
export interface ClusterRecord extends ServerSlotRecord {
  dataDir: string;
}

export function dataDirOf(slotDir: string): string {
  return path.join(slotDir, 'pgdata');
}

export function logFileOf(slotDir: string): string {
  return path.join(slotDir, 'postgres.log');
}

/** The superuser's connection to `database` of the cluster on `port`. */
export function adminConnection(settings: PostgresSettings, port: number, database = 'postgres'): Connection {
  return { bin: settings.bin, port, database, user: superuser };
}

/**
 * A new cluster in `<slotDir>/pgdata` (initdb, as settings.runAs), its server started detached on
 * 127.0.0.1:`port`, the application's role and database made and the `init` file run. What an
 * earlier attempt left in the slot is stopped and removed first. The server is tracked
 * (options.trackProcess) until it is recorded in cluster.json, so a runner that dies meanwhile
 * leaves no server nobody knows of.
 */
export async function createCluster(
  settings: PostgresSettings,
  target: { slotId: string; slotDir: string; port: number },
  options: DriverCallOptions,
): Promise<ClusterRecord> {
  const { slotDir, port } = target;
  const dataDir = dataDirOf(slotDir);
  const initSql = await readInit(settings);
  await stopCluster(settings, slotDir, undefined, options);
  await rm(dataDir, { recursive: true, force: true });
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (settings.runAs) await chown(dataDir, settings.runAs.uid, settings.runAs.gid);
  await checkReachable(settings, dataDir, options.signal);

  options.log(`initdb ${dataDir}${settings.runAs ? ` as ${settings.runAs.name}` : ''}`);
  await runServerProgram(
    settings,
    'initdb',
    // --no-sync: a new slot's files reach the disk with the kernel's writeback (seconds) instead of
    // an fsync of every file (half of initdb's time); a machine that crashes before that loses a
    // slot that no one has written to yet, which a provision again makes anew.
    [
      '-D',
      dataDir,
      '-U',
      superuser,
      '--auth=trust',
      '-E',
      'UTF8',
      '--no-locale',
      '--no-instructions',
      '--no-sync',
    ],
    options.signal,
  );
  await appendFile(path.join(dataDir, 'postgresql.conf'), serverConfig(port));

  const log = await open(logFileOf(slotDir), 'a');
  let child: ReturnType<typeof spawn>;
  try {
    child = spawn(path.join(settings.bin, 'postgres'), ['-D', dataDir], {
      detached: true,
      stdio: ['ignore', log.fd, log.fd],
      cwd: '/',
      env: serverEnv(settings.runAs),
      ...ids(settings.runAs),
    });
  } finally {
    await log.close();
  }
  const pid = child.pid;
  if (pid === undefined) {
    const error = await new Promise<Error>((resolve) => child.once('error', resolve));
    throw new PermanentDriverError(`postgres could not be started: ${spawnFailure(error)}`);
  }
  child.unref();
  const untrack = options.trackProcess?.(pid);
  const record: ClusterRecord = { ...target, dataDir, pid, startTime: processIdentity(pid).startTime };
  try {
    await writeFile(path.join(slotDir, 'cluster.json'), `${JSON.stringify(record, null, 2)}\n`);
    options.log(`started postgres (pid ${pid}) on 127.0.0.1:${port}`);
    await waitReady(settings, record, options.signal);
    await createAppDatabase(settings, port, initSql, options);
  } catch (error) {
    await stopCluster(settings, slotDir, record, options).catch(() => undefined);
    throw error;
  } finally {
    untrack?.();
  }
  return record;
}

/** The `init` file's SQL, read before a cluster is made for it (a missing file fails at once). */
async function readInit(settings: PostgresSettings): Promise<string | undefined> {
  if (settings.init === undefined) return undefined;
  try {
    return await readFile(settings.init, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const cause =
      code === 'ENOENT' ? 'it does not exist' : (environmentCause(error) ?? (error as Error).message);
    throw new PermanentDriverError(
      `the postgres driver's init file ${settings.init} cannot be read: ${cause}; fix \`init\` (relative to the topology file)`,
    );
  }
}

/** The role and database the application uses, then the `init` SQL run as that role. */
async function createAppDatabase(
  settings: PostgresSettings,
  port: number,
  sql: string | undefined,
  options: DriverCallOptions,
) {
  const admin = adminConnection(settings, port);
  await query(
    admin,
    `CREATE ROLE ${ident(settings.user)} LOGIN;\nCREATE DATABASE ${ident(settings.database)} OWNER ${ident(settings.user)};\n`,
    options.signal,
  );
  if (sql === undefined) return;
  options.log(`running ${settings.init} as ${settings.user}`);
  try {
    await query(
      { bin: settings.bin, port, database: settings.database, user: settings.user },
      sql,
      options.signal,
    );
  } catch (error) {
    if (error instanceof SqlError && !error.unreachable)
      throw new PermanentDriverError(`the init file ${settings.init} failed: ${error.message}`);
    throw error;
  }
}

/**
 * Stops the slot's server (`pg_ctl stop -m fast`; the recorded process group if pg_ctl cannot) and
 * waits until it is gone. Idempotent: a slot without a running server is left as it is.
 */
export async function stopCluster(
  settings: PostgresSettings,
  slotDir: string,
  known: ClusterRecord | undefined,
  options: DriverCallOptions,
): Promise<'stopped' | 'not-running'> {
  const record = known ?? (await readCluster(slotDir));
  const dataDir = dataDirOf(slotDir);
  const pidFile = await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8').catch(() => undefined);
  const leaders: ProcessIdentity[] = [];
  if (record) leaders.push({ pid: record.pid, startTime: record.startTime });
  const filePid = Number(pidFile?.split('\n')[0]);
  if (Number.isInteger(filePid) && filePid > 0 && filePid !== record?.pid)
    leaders.push(processIdentity(filePid));
  const running = leaders.filter(isAlive);
  if (running.length === 0) return 'not-running';
  try {
    await runServerProgram(
      settings,
      'pg_ctl',
      ['stop', '-D', dataDir, '-m', 'fast', '-w', '-t', String(stopTimeoutSeconds)],
      options.signal,
    );
  } catch (error) {
    options.log(`pg_ctl stop failed (${(error as Error).message}); stopping the server's process group`);
  }
  for (const leader of running) await stopProcessGroup(leader, killGraceMs, options.signal);
  options.log(`stopped postgres (pid ${running.map((l) => l.pid).join(', ')})`);
  return 'stopped';
}

export function readCluster(slotDir: string): Promise<ClusterRecord | undefined> {
  return readRecord<ClusterRecord>(slotDir, 'cluster.json');
}

/**
 * Waits until the server just started accepts connections, and makes sure it is that server that
 * answers: another process can take the port between the pool's choice and this server's bind (the
 * port pool says so), and this server then exits while the other one, when it is a PostgreSQL too,
 * would answer here: the application's role, database and init file would then be made in another
 * cluster (ci62: "role app already exists", another test's cluster on the same port).
 */
async function waitReady(settings: PostgresSettings, record: ClusterRecord, signal: AbortSignal) {
  const until = Date.now() + startTimeoutMs;
  const ours = await realpath(record.dataDir);
  for (;;) {
    try {
      const [[answering] = []] = await query(
        adminConnection(settings, record.port),
        'SHOW data_directory',
        signal,
      );
      const theirs = answering === undefined ? '' : await realpath(answering).catch(() => answering);
      if (theirs === ours) return;
      throw new Error(
        `port ${record.port} was taken by another PostgreSQL (data directory ${answering}) before this slot's server could listen there; a provision again picks another port`,
      );
    } catch (error) {
      if (!(error instanceof SqlError) || !error.unreachable) throw error;
    }
    if (!serverAlive(record)) {
      const tail = await logTail(logFileOf(record.slotDir));
      throw new PermanentDriverError(
        `postgres exited at start-up on 127.0.0.1:${record.port}; its log (${logFileOf(record.slotDir)}) ends:\n${tail.join('\n')}`,
      );
    }
    if (Date.now() > until) {
      throw new Error(
        `postgres on 127.0.0.1:${record.port} did not accept connections within ${startTimeoutMs / 1000}s`,
      );
    }
    await sleep(readyPollMs, undefined, { signal });
  }
}

/** A directory the server's user cannot write (a private temp or home directory above it) fails initdb obscurely: say it first. */
async function checkReachable(settings: PostgresSettings, dir: string, signal: AbortSignal) {
  if (!settings.runAs) return;
  const ok = await new Promise<boolean>((resolve) => {
    const child = spawn('test', ['-w', dir, '-a', '-x', dir], {
      stdio: 'ignore',
      cwd: '/',
      signal,
      ...ids(settings.runAs),
    });
    child.on('error', () => resolve(false));
    child.on('close', (code) => resolve(code === 0));
  });
  if (!ok) {
    const parent = await firstClosedParent(dir);
    throw new PermanentDriverError(
      `the OS user ${settings.runAs.name}, which runs PostgreSQL, cannot reach ${dir}${parent ? ` (${parent} is closed to other users)` : ''}: open the state directory's parents to it (chmod o+x), choose a state directory it can reach, or set the postgres driver's \`runAs\``,
    );
  }
}

async function firstClosedParent(dir: string): Promise<string | undefined> {
  const parts = path.resolve(dir).split(path.sep).filter(Boolean);
  let current: string = path.sep;
  for (const part of parts.slice(0, -1)) {
    current = path.join(current, part);
    const info = await stat(current).catch(() => undefined);
    if (info && (info.mode & 0o001) === 0) return current;
  }
  return undefined;
}

/** Runs initdb or pg_ctl as the server's user; a failure quotes its output. */
export function runServerProgram(
  settings: PostgresSettings,
  program: 'initdb' | 'pg_ctl',
  args: readonly string[],
  signal: AbortSignal,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(settings.bin, program), args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      cwd: '/',
      env: serverEnv(settings.runAs),
      signal,
      ...ids(settings.runAs),
    });
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk.toString('utf8');
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', (error) => {
      if (signal.aborted) return reject(signal.reason);
      reject(new PermanentDriverError(`${program} could not be started: ${spawnFailure(error)}`));
    });
    child.on('close', (code) => {
      if (code === 0) return resolve();
      if (signal.aborted) return reject(signal.reason);
      const tail = output.trim().split('\n').slice(-3).join(' / ');
      reject(new PermanentDriverError(`${program} ${args[0]} failed (exit ${code}): ${tail}`));
    });
  });
}

function ids(user: OsUser | null): { uid?: number; gid?: number } {
  return user ? { uid: user.uid, gid: user.gid } : {};
}

/** The runner's environment, less what would steer the server elsewhere, with the user's HOME. */
function serverEnv(user: OsUser | null): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LC_ALL: 'C' };
  for (const key of Object.keys(env)) if (key.startsWith('PG')) delete env[key];
  if (user) {
    env.HOME = user.home;
    env.USER = user.name;
    env.LOGNAME = user.name;
  }
  return env;
}

/** The cluster of a slot, reached as the superuser in the application's database. */
export function appAdmin(settings: PostgresSettings, slot: SlotInfo): Connection {
  return adminConnection(settings, portOf(slot), settings.database);
}

export function portOf(slot: SlotInfo): number {
  return slotPort(slot, 'PostgreSQL');
}
