/**
 * Starting `cutover server`: options from flags and the environment, the loopback rule for a server
 * without tokens, and a graceful shutdown on SIGTERM/SIGINT.
 */
import { isIP } from 'node:net';
import { CutoverError } from '../core/errors.js';
import { buildServer, type CutoverServer } from './app.js';
import type { ServerOptions } from './route-context.js';

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  if (isIP(host) === 6) return host === '::1' || host === '0:0:0:0:0:0:0:1';
  return false;
}

export interface ListenOptions extends ServerOptions {
  host: string;
  port: number;
}

export interface RunningServer extends CutoverServer {
  url: string;
}

/** Builds and starts listening; refuses a non-loopback address when no tokens are configured. */
export async function startServer(options: ListenOptions): Promise<RunningServer> {
  if (options.tokens === null && !isLoopback(options.host)) {
    throw new CutoverError(
      'USAGE',
      `refusing to listen on ${options.host} without tokens: anybody who can reach it could run migrations. Configure tokens (--tokens-file or CUTOVER_TOKENS), or listen on 127.0.0.1`,
    );
  }
  const server = await buildServer(options);
  const address = await server.app.listen({ host: options.host, port: options.port });
  return { ...server, url: address };
}
