import { mkdir, open, readFile, rename } from 'node:fs/promises';
import path from 'node:path';
import type { WriteHold } from '../core/layout.js';
import { StateLayout } from '../core/state-layout.js';

/**
 * The built-in router's routing table: one JSON file per state directory,
 * `<stateDir>/router/routes.json`, holding every route's settings and its split of traffic between
 * slots. The router process (`cutover proxy`) serves from it and reloads it when it changes; the
 * file is replaced atomically, so the router never reads half a table.
 */
export interface RoutingTable {
  version: 1;
  routes: Record<string, RoutingEntry>;
}

export interface RoutingEntry {
  environment: string;
  listen: string;
  preview?: string;
  component: string;
  blue: string[];
  green: string[];
  greenPercent: number;
  drainTimeoutMs: number;
  /** The route's upstreamTimeout; absent: the router's default. */
  upstreamTimeoutMs?: number;
  /** The route's bodyTimeout and queueTimeout; absent: the router's defaults. */
  bodyTimeoutMs?: number;
  queueTimeoutMs?: number;
  /**
   * A write hold (issue 28, the switch of a stateful component): while set, the router forwards no
   * new request of this route; it holds them (at most `maxHeld`, beyond that 503 with Retry-After)
   * until a table without the hold (or with another `id`) is applied, then sends each by the weights
   * of that table (to green, after the switch; to blue, after an abort). Requests already in flight
   * go on. `expiresAt` is the router's own bound for an engine that died holding: from then on it
   * releases what it holds by the table's weights and holds nothing new.
   */
  hold?: WriteHold;
  /** TLS termination on `listen` (certificate paths absolute); absent: plain HTTP. */
  tls?: RoutingTls;
  /** HTTP/2 with prior knowledge on a plain `listen`. */
  h2c?: boolean;
  updatedAt: number;
}

export interface RoutingTls {
  /** PEM files; a client's SNI name picks the first certificate whose names match, else the first. */
  certificates: { cert: string; key: string }[];
  minVersion: 'TLSv1.2' | 'TLSv1.3';
  /** Offer h2 by ALPN beside http/1.1. */
  http2: boolean;
  /** A plain listener answering every request 308 to https on `listen`'s port. */
  redirectHttp?: string;
  hsts?: { maxAgeSeconds: number; includeSubDomains: boolean; preload: boolean };
}

/** `stateDir`: the state directory's path (the router is a program of its own, not the engine's StateDir). */
export function routingTablePath(stateDir: string): string {
  return new StateLayout(stateDir).routingTableFile();
}

export async function readRoutingTable(stateDir: string): Promise<RoutingTable> {
  try {
    return JSON.parse(await readFile(routingTablePath(stateDir), 'utf8')) as RoutingTable;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, routes: {} };
    throw error;
  }
}

/** Table keys are `<environment>/<route>`: one router serves every environment of a state dir. */
export function routeKey(environment: string, route: string): string {
  return `${environment}/${route}`;
}

/** Replaces the table atomically: the router never reads half of it. */
export async function writeRoutingTable(stateDir: string, table: RoutingTable): Promise<void> {
  const file = routingTablePath(stateDir);
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  const handle = await open(temp, 'w');
  try {
    await handle.writeFile(`${JSON.stringify(table, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, file);
}

/**
 * The addresses of `entry` (its listen, preview and TLS redirect) that a route of another
 * environment already has in the table, with that route's key: the router serves an address for
 * one route only. Routes of `entry`'s own environment are left out: its layout's addresses are
 * checked together by the topology, and a renamed route takes its address over within one migration.
 */
export function addressesTaken(table: RoutingTable, entry: RoutingEntry): { address: string; key: string }[] {
  const own = entryAddresses(entry);
  return Object.entries(table.routes).flatMap(([key, other]) =>
    other.environment === entry.environment
      ? []
      : entryAddresses(other)
          .filter((address) => own.includes(address))
          .map((address) => ({ address, key })),
  );
}

/** As the router binds them: lower case. */
function entryAddresses(entry: RoutingEntry): string[] {
  return [entry.listen, entry.preview, entry.tls?.redirectHttp]
    .filter((address): address is string => address !== undefined)
    .map((address) => address.toLowerCase());
}
