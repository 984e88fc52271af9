/**
 * The redis driver's servers (redis-driver.ts): one redis-server per slot, its config file, data
 * and log in the slot's directory, started detached on a loopback port and stopped by its pid.
 */
import { spawn } from 'node:child_process';
import { mkdir, open, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaults, type RedisDriverSpec } from '../../core/topology/types.js';
import { processIdentity } from '../../platform/process-identity.js';
import { findProgram, pathDirs } from './find-program.js';
import { stopProcessGroup } from './process-group.js';
import { RedisConnectionError, redis } from './redis-client.js';
import {
  logTail,
  readRecord,
  type ServerSlotRecord,
  serverAlive,
  portOf as slotPort,
} from './server-slot.js';
import { spawnFailure } from './spawn-failure.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from './types.js';

/** How long a new server may take to answer PING. */
const startTimeoutMs = 30_000;
/** After SIGTERM (redis-server flushes its AOF and exits), the time before SIGKILL. */
const killGraceMs = 10_000;
const readyPollMs = 50;
/** A server that has not exited on SIGTERM gets it again this often. */
const termRetryMs = 200;
/** A call to a server that does not answer within this fails (a fence has its own bound). */
export const callTimeoutMs = 5_000;

/** The driver's settings as the runner resolves them on its machine. */
export interface RedisSettings {
  /** The redis-server program. */
  server: string;
  appendfsync: 'always' | 'everysec';
}

/** What the driver keeps of a slot's server (in SlotInfo.details and `<slotDir>/server.json`). */
export type ServerRecord = ServerSlotRecord;

export async function redisSettings(ctx: ComponentCallContext): Promise<RedisSettings> {
  const spec: Partial<RedisDriverSpec> = ctx.driver.type === 'redis' ? ctx.driver : {};
  const dirs = spec.bin !== undefined ? [path.resolve(ctx.baseDir, spec.bin)] : pathDirs();
  const server = await findProgram('redis-server', dirs);
  if (server !== null) return { server, appendfsync: spec.appendfsync ?? defaults.redisAppendfsync };
  throw new PermanentDriverError(
    spec.bin !== undefined
      ? `redis-server is not in ${dirs[0]}: set the redis driver's \`bin\` to the directory of redis-server, or leave it out to use the PATH`
      : "redis-server is not on the PATH: install Debian's redis-server (apt-get install redis-server; its own service is not needed) or set the redis driver's `bin`",
  );
}

/**
 * The slot's server settings (a file in the slot, so a server started by hand runs the same):
 * loopback TCP only, the append-only file as the persistence (no RDB snapshots), a full sync
 * streamed at once (no wait for more replicas), a backlog large enough for the reverse direction to
 * continue from the promotion after minutes of writes, and replicas read-only.
 */
export function serverConfig(settings: RedisSettings, slotDir: string, port: number): string {
  return [
    '# cutover redis driver',
    `port ${port}`,
    'bind 127.0.0.1',
    'protected-mode yes',
    `dir ${JSON.stringify(path.join(slotDir, 'data'))}`,
    'daemonize no',
    'logfile ""',
    'save ""',
    'appendonly yes',
    `appendfsync ${settings.appendfsync}`,
    'repl-diskless-sync yes',
    'repl-diskless-sync-delay 0',
    'repl-backlog-size 64mb',
    'replica-read-only yes',
    '',
  ].join('\n');
}

export function logFileOf(slotDir: string): string {
  return path.join(slotDir, 'redis.log');
}

/**
 * A new server in the slot, started detached on 127.0.0.1:`port` and answering PING. What an
 * earlier attempt left there is stopped and removed first. The server is tracked
 * (options.trackProcess) until it is recorded in server.json.
 */
export async function startServer(
  settings: RedisSettings,
  target: { slotId: string; slotDir: string; port: number },
  options: DriverCallOptions,
): Promise<ServerRecord> {
  const { slotDir, port } = target;
  await stopServer(slotDir, undefined, options);
  await rm(path.join(slotDir, 'data'), { recursive: true, force: true });
  await mkdir(path.join(slotDir, 'data'), { recursive: true, mode: 0o700 });
  const config = path.join(slotDir, 'redis.conf');
  await writeFile(config, serverConfig(settings, slotDir, port), { mode: 0o600 });

  const log = await open(logFileOf(slotDir), 'a');
  let child: ReturnType<typeof spawn>;
  try {
    child = spawn(settings.server, [config], {
      detached: true,
      stdio: ['ignore', log.fd, log.fd],
      cwd: slotDir,
    });
  } finally {
    await log.close();
  }
  const pid = child.pid;
  if (pid === undefined) {
    const error = await new Promise<Error>((resolve) => child.once('error', resolve));
    throw new PermanentDriverError(`redis-server could not be started: ${spawnFailure(error)}`);
  }
  child.unref();
  const untrack = options.trackProcess?.(pid);
  const record: ServerRecord = { ...target, pid, startTime: processIdentity(pid).startTime };
  try {
    // Written whole, then renamed: a reader never sees half of it.
    const file = path.join(slotDir, 'server.json');
    await writeFile(`${file}.tmp`, `${JSON.stringify(record, null, 2)}\n`);
    await rename(`${file}.tmp`, file);
    options.log(`started redis-server (pid ${pid}) on 127.0.0.1:${port}`);
    await waitReady(record, options.signal);
  } catch (error) {
    await stopServer(slotDir, record, options).catch(() => undefined);
    throw error;
  } finally {
    untrack?.();
  }
  return record;
}

/**
 * Waits until the server just started answers, and makes sure it is that server: another process
 * can take the port between the port pool's choice and this server's bind, and this server then
 * exits while another redis-server on the port would answer PING (as a PostgreSQL did for the
 * postgres driver: postgres-cluster.ts). The answering server's process id must be this one's.
 */
async function waitReady(record: ServerRecord, signal: AbortSignal) {
  const until = Date.now() + startTimeoutMs;
  for (;;) {
    try {
      const info = String(await redis(record.port, ['INFO', 'server'], { signal, timeoutMs: 1_000 }));
      const answering = Number(/^process_id:(\d+)/m.exec(info)?.[1]);
      if (answering === record.pid) return;
      throw new Error(
        `port ${record.port} was taken by another redis-server (pid ${answering || 'unknown'}) before this slot's server could listen there; a provision again picks another port`,
      );
    } catch (error) {
      if (!(error instanceof RedisConnectionError)) throw error;
    }
    if (!serverAlive(record)) {
      const tail = await logTail(logFileOf(record.slotDir));
      throw new PermanentDriverError(
        `redis-server exited at start-up on 127.0.0.1:${record.port}; its log (${logFileOf(record.slotDir)}) ends:\n${tail.join('\n')}`,
      );
    }
    if (Date.now() > until)
      throw new Error(
        `redis-server on 127.0.0.1:${record.port} did not answer within ${startTimeoutMs / 1000}s`,
      );
    await sleep(readyPollMs, undefined, { signal });
  }
}

/**
 * Stops the slot's server and waits until it is gone: SIGTERM (it fsyncs its AOF and exits), again
 * every 200 ms while it refuses (a server still writing its first AOF after a sync refuses to exit,
 * and does not try again by itself), then SIGKILL to its process group after the grace. Idempotent.
 */
export async function stopServer(
  slotDir: string,
  known: ServerRecord | undefined,
  options: DriverCallOptions,
): Promise<'stopped' | 'not-running'> {
  const record = known ?? (await readServer(slotDir));
  if (!record || !serverAlive(record)) return 'not-running';
  const until = Date.now() + killGraceMs;
  while (serverAlive(record) && Date.now() < until) {
    try {
      process.kill(record.pid, 'SIGTERM');
    } catch {
      break;
    }
    await sleep(termRetryMs, undefined, { signal: options.signal });
  }
  await stopProcessGroup({ pid: record.pid, startTime: record.startTime }, 0, options.signal);
  options.log(`stopped redis-server (pid ${record.pid})`);
  return 'stopped';
}

export function readServer(slotDir: string): Promise<ServerRecord | undefined> {
  return readRecord<ServerRecord>(slotDir, 'server.json');
}

export function portOf(slot: SlotInfo): number {
  return slotPort(slot, 'redis');
}
