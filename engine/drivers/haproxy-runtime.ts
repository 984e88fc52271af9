/**
 * HAProxy's runtime API (the stats socket, `level admin`), one command per connection: haproxy
 * answers and closes, so a command's answer is everything read before the close. Commands change
 * the running worker at once, with no reload: `set server <b>/<s> weight|state`, `add server`,
 * `del server`; `show stat` and `show servers state` read it.
 */
import { createConnection } from 'node:net';

/** Longest a command may take to answer (haproxy answers in microseconds unless it is stuck). */
export const haproxyCommandTimeoutMs = 5_000;

/** The socket cannot be reached: haproxy is not running, or is between a kill and a start. */
export class HaproxyUnreachableError extends Error {
  override readonly name = 'HaproxyUnreachableError';
}

/** Sends one command line, resolves with haproxy's whole answer. */
export function runtimeCommand(socket: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const connection = createConnection({ path: socket });
    let answer = '';
    let settled = false;
    const done = (error: Error | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      connection.destroy();
      if (error) reject(error);
      else resolve(answer);
    };
    const timer = setTimeout(
      () =>
        done(
          new HaproxyUnreachableError(
            `${socket}: no answer to "${command}" within ${haproxyCommandTimeoutMs} ms`,
          ),
        ),
      haproxyCommandTimeoutMs,
    );
    connection.setEncoding('utf8');
    connection.on('connect', () => connection.end(`${command}\n`));
    connection.on('data', (chunk: string) => {
      answer += chunk;
    });
    connection.on('end', () => done(null));
    connection.on('close', () => done(null));
    connection.on('error', (error: NodeJS.ErrnoException) =>
      done(new HaproxyUnreachableError(`${socket}: ${error.code ?? error.message}`)),
    );
  });
}

/** The answer haproxy gives a change it made: empty, or one of these. Anything else is a refusal. */
const acceptedAnswers: readonly RegExp[] = [/^New server registered\.$/, /^Server deleted\.$/];

/**
 * Sends changes in one connection (`a;b;c`): haproxy runs them one after the other in one pass,
 * so a split changes in one round trip, however loaded the machine. haproxy runs every command
 * even after one it refuses: a refusal rejects with haproxy's words (the caller puts back what it
 * wants back); HaproxyUnreachableError when the socket does not answer.
 */
export async function runtimeChanges(socket: string, commands: readonly string[]): Promise<void> {
  if (commands.length === 0) return;
  // `show version` last: its answer proves haproxy ran every command before it. A connection closed
  // without it (haproxy killed mid-change) is not a change that was made.
  const answer = await runtimeCommand(socket, [...commands, 'show version'].join(';'));
  const lines = answer
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const version = lines.pop();
  if (version === undefined || !/^\d+\.\d+/.test(version))
    throw new HaproxyUnreachableError(
      `${socket}: the connection closed before haproxy answered every command (answer: ${JSON.stringify(answer.slice(0, 120))})`,
    );
  const refused = lines.filter((line) => !acceptedAnswers.some((accepted) => accepted.test(line)));
  if (refused.length > 0)
    throw new HaproxyRefusedError(
      `haproxy refused the change: ${refused.join('; ')} (commands: ${commands.join('; ')})`,
    );
}

/** One change; see runtimeChanges. */
export function runtimeChange(socket: string, command: string): Promise<void> {
  return runtimeChanges(socket, [command]);
}

/** haproxy answered a command with a refusal (a bad value, a server that still has connections). */
export class HaproxyRefusedError extends Error {
  override readonly name = 'HaproxyRefusedError';
}

/** One row of a CSV-like table (`show stat`, `show servers state`), by the header's names. */
export type Row = Record<string, string>;

/** `show stat`: every proxy's and server's counters, by the header's field names. */
export async function showStat(socket: string): Promise<Row[]> {
  const text = await runtimeCommand(socket, 'show stat');
  const [header, ...lines] = text.split('\n').filter((line) => line.trim() !== '');
  if (!header?.startsWith('# '))
    throw new HaproxyUnreachableError(`${socket}: "show stat" answered ${text.slice(0, 80)}`);
  const names = header.slice(2).split(',');
  return lines.map((line) => {
    const values = line.split(',');
    return Object.fromEntries(names.map((name, i) => [name, values[i] ?? '']));
  });
}

/** A server as `show servers state` reports it. */
export interface ServerState {
  backend: string;
  name: string;
  /** host:port. */
  address: string;
  /** srv_admin_state: 0 ready; bit 0x01 maintenance set by hand or API, 0x08 drain set so. */
  admin: number;
  /** The weight set by the configuration or the API (srv_uweight). */
  weight: number;
}

/** Every server of every backend (null: haproxy answered no table: no backend at all). */
export async function showServersState(socket: string): Promise<ServerState[]> {
  const text = await runtimeCommand(socket, 'show servers state');
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  const header = lines.find((line) => line.startsWith('# '));
  if (!header) {
    if (lines.length <= 1) return []; // "1" alone: the format version, no server
    throw new HaproxyUnreachableError(`${socket}: "show servers state" answered ${text.slice(0, 80)}`);
  }
  const names = header.slice(2).split(' ');
  return lines
    .filter((line) => !line.startsWith('#') && line.includes(' '))
    .map((line) => {
      const values = line.split(' ');
      const field = (name: string) => values[names.indexOf(name)] ?? '';
      const host = field('srv_addr');
      return {
        backend: field('be_name'),
        name: field('srv_name'),
        address: `${host.includes(':') ? `[${host}]` : host}:${field('srv_port')}`,
        admin: Number(field('srv_admin_state')),
        weight: Number(field('srv_uweight')),
      };
    });
}

/** `show info`: the worker's pid and uptime, among others. */
export async function showInfo(socket: string): Promise<Record<string, string>> {
  const text = await runtimeCommand(socket, 'show info');
  const info: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) info[line.slice(0, colon)] = line.slice(colon + 1).trim();
  }
  if (!info.Pid) throw new HaproxyUnreachableError(`${socket}: "show info" answered ${text.slice(0, 80)}`);
  return info;
}
