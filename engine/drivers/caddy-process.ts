/**
 * The caddy route driver's two Caddy processes (caddy-config.ts): started by the driver, detached,
 * each with everything under `<state>/caddy/<instance>/` (its configuration file, pid file, output,
 * and HOME and XDG directories, so Caddy writes nowhere else), its admin API on a unix socket there
 * that accepts only the `cutover` origin. Never a system service.
 *
 * A process is started from the configuration file the driver wrote after the last load that
 * succeeded, so a restart comes back to what cutover last applied (not to hand edits made since).
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { request } from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import { type CaddyInstance, type CaddyPaths, type CaddyRecord, caddyAdminOrigin } from './caddy-config.js';
import { PermanentDriverError } from './types.js';

/** Longest a Caddy the driver started may take to answer on its admin socket. */
export const caddyStartTimeoutMs = 15_000;
/** Longest one admin API call may take (a load provisions the whole configuration). */
export const caddyAdminTimeoutMs = 10_000;
const startPollIntervalMs = 25;
/** Longest unix socket path Linux accepts (sun_path is 108 bytes with its NUL). */
const maxSocketPathBytes = 107;

export interface AdminAnswer {
  status: number;
  body: string;
}

/** One call to an instance's admin API. Rejects when the socket does not answer. */
export function adminCall(
  paths: CaddyPaths,
  instance: CaddyInstance,
  method: 'GET' | 'POST' | 'PATCH',
  urlPath: string,
  body?: unknown,
): Promise<AdminAnswer> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath: paths.adminSocket(instance),
        method,
        path: urlPath,
        agent: false,
        timeout: caddyAdminTimeoutMs,
        headers: {
          host: caddyAdminOrigin,
          ...(payload !== undefined
            ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }
            : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${caddyAdminTimeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** Whether the instance's admin API answers now. */
export async function caddyAnswers(paths: CaddyPaths, instance: CaddyInstance): Promise<boolean> {
  if (!existsSync(paths.adminSocket(instance))) return false;
  try {
    return (await adminCall(paths, instance, 'GET', '/config/admin')).status === 200;
  } catch {
    return false;
  }
}

/** The configuration file a start loads: the last one the driver loaded into this instance. */
export function configFile(paths: CaddyPaths, instance: CaddyInstance): string {
  return path.join(paths.instanceDir(instance), 'caddy.json');
}

/**
 * Makes sure the instance runs and answers, starting it from its configuration file (or with
 * `initial` when there is none yet). Returns the pid it started, or null when one already ran.
 */
export async function ensureCaddy(
  paths: CaddyPaths,
  instance: CaddyInstance,
  initial: unknown,
  bin: string,
  log: (line: string) => void,
): Promise<number | null> {
  if (await caddyAnswers(paths, instance)) return null;
  const dir = paths.instanceDir(instance);
  refuseLongSocketPath(paths.adminSocket(instance));
  mkdirSync(dir, { recursive: true });
  const file = configFile(paths, instance);
  const fresh = !existsSync(file);
  if (fresh) await writeFileAtomically(file, `${JSON.stringify(initial, null, 2)}\n`);
  // A Caddy killed with SIGKILL leaves its sockets: nothing answers on them (checked above).
  await removeSockets(dir);
  const outputFile = path.join(dir, 'output.log');
  const out = openSync(outputFile, 'a');
  const outputFrom = fstatSync(out).size;
  let pid: number | undefined;
  let exited = false;
  try {
    const child = spawn(bin, ['run', '--config', file, '--pidfile', path.join(dir, 'caddy.pid')], {
      cwd: dir,
      detached: true,
      stdio: ['ignore', out, out],
      env: {
        ...inheritedEnv(),
        HOME: dir,
        XDG_CONFIG_HOME: path.join(dir, 'config'),
        XDG_DATA_HOME: path.join(dir, 'data'),
      },
    });
    child.unref();
    child.once('exit', () => {
      exited = true;
    });
    pid = await new Promise<number | undefined>((resolve, reject) => {
      child.once('spawn', () => resolve(child.pid));
      child.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          error.code === 'ENOENT'
            ? new PermanentDriverError(
                `${bin} not found: the caddy route driver runs Caddy (Debian: apt-get install caddy), or set the driver's bin`,
              )
            : error,
        ),
      );
    });
  } finally {
    closeSync(out); // caddy has its own copy
  }
  const from = fresh ? 'an empty configuration' : file;
  log(`started caddy (${instance}) for ${paths.dir} (pid ${pid}) from ${from}`);
  const deadline = Date.now() + caddyStartTimeoutMs;
  while (Date.now() < deadline) {
    if (await caddyAnswers(paths, instance)) return pid ?? null;
    if (exited) break;
    await sleep(startPollIntervalMs);
  }
  const said = lastLinesSince(outputFile, outputFrom);
  throw new Error(
    `caddy (${instance}) for ${paths.dir} did not start${exited ? ' (it exited)' : ` within ${caddyStartTimeoutMs} ms`}${said ? `: ${said}` : ''} (its output: ${outputFile})`,
  );
}

/**
 * Loads a whole configuration into a running instance: Caddy applies all of it or none of it (a
 * configuration it rejects leaves the previous one running). A rejection is permanent; a Caddy
 * that does not answer (killed, restarting) is not: the step fails with that line, and is retried.
 */
export async function loadConfig(paths: CaddyPaths, instance: CaddyInstance, config: unknown): Promise<void> {
  let answer: AdminAnswer;
  try {
    answer = await adminCall(paths, instance, 'POST', '/load', config);
  } catch (error) {
    throw new Error(
      `caddy (${instance}) for ${paths.dir} did not answer its admin API (${paths.adminSocket(instance)}): ${(error as Error).message}; it was stopped or restarted during the change, which it applies whole or not at all: the step can be run again`,
    );
  }
  if (answer.status !== 200)
    throw new PermanentDriverError(
      `caddy (${instance}) rejected the configuration cutover generated (HTTP ${answer.status}): ${errorOf(answer.body)}; the previous one still runs`,
    );
}

/** Longest a Caddy told to stop (SIGTERM) may take before it is killed. */
export const caddyStopTimeoutMs = 10_000;

/** The pid an instance wrote when it started, or null. */
export function caddyPid(paths: CaddyPaths, instance: CaddyInstance): number | null {
  try {
    const pid = Number(readFileSync(path.join(paths.instanceDir(instance), 'caddy.pid'), 'utf8').trim());
    return Number.isInteger(pid) && pid > 1 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Stops an instance the driver started (its pid file names it) once it serves nothing: SIGTERM,
 * SIGKILL after `caddyStopTimeoutMs`. Only a process whose admin socket answered is signalled.
 */
export async function stopCaddy(
  paths: CaddyPaths,
  instance: CaddyInstance,
  log: (line: string) => void,
): Promise<void> {
  const pid = caddyPid(paths, instance);
  if (pid === null || !(await caddyAnswers(paths, instance))) return;
  const signal = (name: NodeJS.Signals | 0) => {
    try {
      process.kill(pid, name);
      return true;
    } catch {
      return false; // gone
    }
  };
  if (!signal('SIGTERM')) return;
  const deadline = Date.now() + caddyStopTimeoutMs;
  while (Date.now() < deadline && signal(0)) await sleep(startPollIntervalMs);
  if (signal(0)) signal('SIGKILL');
  log(`stopped caddy (${instance}) for ${paths.dir} (pid ${pid}): no route left`);
}

/** The configuration an instance runs now, or null when it does not answer. */
export async function liveConfig(paths: CaddyPaths, instance: CaddyInstance): Promise<unknown | null> {
  try {
    const answer = await adminCall(paths, instance, 'GET', '/config/');
    return answer.status === 200 ? (JSON.parse(answer.body) as unknown) : null;
  } catch {
    return null;
  }
}

/** The driver's record of its routes in a state directory (empty when there is none yet). */
export async function readRecord(file: string): Promise<CaddyRecord> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, routes: {} };
    throw error;
  }
  let parsed: Partial<CaddyRecord> | null = null;
  try {
    parsed = JSON.parse(text) as Partial<CaddyRecord>;
  } catch {
    // reported below
  }
  if (parsed?.version !== 1 || typeof parsed.routes !== 'object' || parsed.routes === null)
    throw new PermanentDriverError(`${file} is not a cutover caddy record ({version: 1, routes: {...}})`);
  return parsed as CaddyRecord;
}

export async function writeFileAtomically(file: string, text: string): Promise<void> {
  const temp = `${file}.${process.pid}.tmp`;
  const handle = await open(temp, 'w');
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, file);
}

function refuseLongSocketPath(socket: string): void {
  if (Buffer.byteLength(socket) > maxSocketPathBytes)
    throw new PermanentDriverError(
      `the caddy driver's admin socket ${socket} is longer than the ${maxSocketPathBytes} bytes a unix socket path may have: use a state directory with a shorter path (--state-dir, CUTOVER_STATE_DIR)`,
    );
}

async function removeSockets(dir: string): Promise<void> {
  for (const name of await readdir(dir)) {
    if (name.endsWith('.sock')) await rm(path.join(dir, name), { force: true });
  }
}

function errorOf(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: string };
    return parsed.error ?? body.trim();
  } catch {
    return body.trim();
  }
}

/** The last lines `file` got after byte `offset`: what a Caddy that did not start said. */
function lastLinesSince(file: string, offset: number): string | undefined {
  try {
    const lines = readFileSync(file).subarray(offset).toString('utf8').trim().split('\n');
    return lines.slice(-3).join(' | ') || undefined;
  } catch {
    return undefined;
  }
}
