import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CutoverError } from '../core/errors.js';
import { type HostPort, parseHostPort } from '../core/host-port.js';
import { StateLayout } from '../core/state-layout.js';

/**
 * Where the router's control API (and `/metrics`) listens, kept in `<stateDir>/router/control.json`
 * (`{ "listen": "127.0.0.1:9464" }`): `cutover proxy --control-listen` writes it, and every later
 * router of the state directory (a restart, one the engine starts) comes back on the same address,
 * so a Prometheus scrape configuration survives restarts. Without the file the router takes a random
 * port on 127.0.0.1, as before.
 */
export interface ControlSettings {
  listen: string;
}

/** The router's default: a random port on loopback, found in `router/router.json`. */
export const defaultControlListen: HostPort = { host: '127.0.0.1', port: 0 };

export function controlSettingsPath(stateDir: string): string {
  return new StateLayout(stateDir).routerControlFile();
}

/**
 * The control address a router of `stateDir` listens on: `flag` when given (it must be host:port
 * with a fixed port), else the one kept in the state directory, else the default.
 */
export function controlListenFor(stateDir: string, flag?: string): HostPort {
  if (flag !== undefined) return parseControlListen(flag, '--control-listen');
  const kept = readControlSettings(stateDir);
  if (!kept) return defaultControlListen;
  return parseControlListen(kept.listen, controlSettingsPath(stateDir));
}

/** Keeps `listen` for the next routers of `stateDir` (atomically: a reader never sees half of it). */
export function keepControlListen(stateDir: string, listen: string): void {
  const file = controlSettingsPath(stateDir);
  mkdirSync(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  const settings: ControlSettings = { listen };
  writeFileSync(temp, `${JSON.stringify(settings)}\n`);
  renameSync(temp, file);
}

function readControlSettings(stateDir: string): ControlSettings | null {
  const file = controlSettingsPath(stateDir);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new CutoverError('STATE_CORRUPT', `${file}: ${(error as Error).message}`);
  }
  const listen = (parsed as Partial<ControlSettings> | null)?.listen;
  if (typeof listen !== 'string')
    throw new CutoverError('STATE_CORRUPT', `${file}: not {"listen": "host:port"}`);
  return { listen };
}

function parseControlListen(text: string, where: string): HostPort {
  const address = parseHostPort(text);
  if (!address)
    throw new CutoverError(
      'USAGE',
      `${where}: ${JSON.stringify(text)} is not host:port with a port from 1 to 65535 (e.g. 127.0.0.1:9464)`,
    );
  return address;
}

/** The host a client dials to reach a control listener on `host` (a wildcard: loopback). */
export function controlDialHost(host: string | undefined): string {
  if (host === undefined || host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '::1';
  return host;
}
