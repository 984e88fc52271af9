/**
 * The caddy route driver's two Caddy processes (caddy-config.ts): started by the driver, detached,
 * each with everything under `<state>/caddy/<instance>/` (its configuration file, pid file, output,
 * and HOME and XDG directories, so Caddy writes nowhere else), its admin API on a unix socket there
 * that accepts only the `cutover` origin. Never a system service.
 *
 * A process is started from the configuration file the driver wrote after the last load that
 * succeeded, so a restart comes back to what cutover last applied (not to hand edits made since).
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { request } from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import { outputSince, pollFor, refuseLongSocketPath, startDetached } from './balancer-process.js';
import { type CaddyInstance, type CaddyPaths, type CaddyRecord, caddyAdminOrigin } from './caddy-config.js';
import { writeAtomically } from './driver-files.js';
import { readBalancerRecord } from './managed-balancer.js';
import { PermanentDriverError } from './types.js';

/** Longest a Caddy the driver started may take to answer on its admin socket. */
export const caddyStartTimeoutMs = 15_000;
/** Longest one admin API call may take (a load provisions the whole configuration). */
export const caddyAdminTimeoutMs = 10_000;
const startPollIntervalMs = 25;

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
  refuseLongSocketPath(paths.adminSocket(instance), "the caddy driver's admin socket");
  mkdirSync(dir, { recursive: true });
  const file = configFile(paths, instance);
  const fresh = !existsSync(file);
  if (fresh) await writeAtomically(file, `${JSON.stringify(initial, null, 2)}\n`);
  // A Caddy killed with SIGKILL leaves its sockets: nothing answers on them (checked above).
  await removeSockets(dir);
  const outputFile = path.join(dir, 'output.log');
  const started = await startDetached(
    bin,
    ['run', '--config', file, '--pidfile', path.join(dir, 'caddy.pid')],
    {
      dir,
      output: outputFile,
      cwd: dir,
      env: {
        ...inheritedEnv(),
        HOME: dir,
        XDG_CONFIG_HOME: path.join(dir, 'config'),
        XDG_DATA_HOME: path.join(dir, 'data'),
      },
      notFound: `${bin} not found: the caddy route driver runs Caddy (Debian: apt-get install caddy), or set the driver's bin`,
    },
  );
  const from = fresh ? 'an empty configuration' : file;
  log(`started caddy (${instance}) for ${paths.dir} (pid ${started.pid}) from ${from}`);
  const answers = async () => ((await caddyAnswers(paths, instance)) ? true : null);
  const settings = { timeoutMs: caddyStartTimeoutMs, intervalMs: startPollIntervalMs, stop: started.exited };
  if (await pollFor(answers, settings)) return started.pid ?? null;
  const exited = started.exited();
  const said = lastLines(await outputSince(outputFile, started.outputFrom));
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
export function readRecord(file: string): Promise<CaddyRecord> {
  return readBalancerRecord(file, 'cutover caddy record');
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

/** The last lines of what a Caddy that did not start said. */
function lastLines(output: string): string | undefined {
  return output.trim().split('\n').slice(-3).join(' | ') || undefined;
}
