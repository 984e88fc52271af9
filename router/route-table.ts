import { mkdir, open, readFile, rename } from 'node:fs/promises';
import path from 'node:path';
import type {
  DriverCallOptions,
  RouteCallContext,
  RouteDriver,
  RouteState,
} from '../engine/drivers/types.js';

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
  updatedAt: number;
}

export function routingTablePath(stateDir: string): string {
  return path.join(stateDir, 'router', 'routes.json');
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

async function writeRoutingTable(stateDir: string, table: RoutingTable): Promise<void> {
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

export function createRouteTableDriver(): RouteDriver {
  // Table updates are read-modify-write of one file: one at a time.
  let queue: Promise<unknown> = Promise.resolve();
  const serialised = <T>(f: () => Promise<T>): Promise<T> => {
    const next = queue.then(f, f);
    queue = next.catch(() => undefined);
    return next;
  };
  return {
    apply(ctx: RouteCallContext, state: RouteState, options: DriverCallOptions) {
      return serialised(async () => {
        const table = await readRoutingTable(ctx.stateDir);
        const entry: RoutingEntry = {
          environment: ctx.environment,
          listen: state.spec.listen,
          component: state.spec.to,
          blue: state.blue?.addresses ?? [],
          green: state.green?.addresses ?? [],
          greenPercent: state.greenPercent,
          drainTimeoutMs: state.spec.drain.timeout,
          updatedAt: Date.now(),
        };
        if (state.spec.preview !== undefined) entry.preview = state.spec.preview;
        if (state.spec.upstreamTimeout !== undefined) entry.upstreamTimeoutMs = state.spec.upstreamTimeout;
        if (state.spec.bodyTimeout !== undefined) entry.bodyTimeoutMs = state.spec.bodyTimeout;
        if (state.spec.queueTimeout !== undefined) entry.queueTimeoutMs = state.spec.queueTimeout;
        table.routes[routeKey(ctx.environment, state.route)] = entry;
        await writeRoutingTable(ctx.stateDir, table);
        options.log(`route ${state.route}: ${100 - state.greenPercent}% blue, ${state.greenPercent}% green`);
      });
    },
    remove(ctx: RouteCallContext, route: string, options: DriverCallOptions) {
      return serialised(async () => {
        const table = await readRoutingTable(ctx.stateDir);
        delete table.routes[routeKey(ctx.environment, route)];
        await writeRoutingTable(ctx.stateDir, table);
        options.log(`route ${route} removed`);
      });
    },
  };
}
