/**
 * A real nginx for the differential test (test/support/nginx.ts), configured as the nginx route
 * driver configures a route (its own renderNginxConfig), one worker.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { renderNginxConfig, type Sidecar } from '../../engine/drivers/nginx-driver.js';
import { runNginx } from '../support/nginx.js';
import { environment, type Resources, stateDirFor } from './support.js';

export const nginxBinary = '/usr/sbin/nginx';

/** Routes by name: the listen address, the one upstream behind it, the route's bodyTimeout. */
export type NginxRoutes = Record<string, { listen: string; upstream: string; bodyTimeoutMs?: number }>;

/**
 * Starts nginx serving `routes`. The driver's servers close every client connection after one
 * response (`keepalive_timeout 0`, for its reloads); here nginx keeps them open, as by default, so
 * that pipelined requests are compared with the router's (which keeps connections alive).
 */
export async function startNginx(resources: Resources, routes: NginxRoutes): Promise<void> {
  const dir = await stateDirFor(resources);
  const sidecar: Sidecar = { version: 1, routes: {} };
  for (const [route, { listen, upstream, bodyTimeoutMs }] of Object.entries(routes))
    sidecar.routes[`${environment}/${route}`] = {
      environment,
      route,
      listen,
      blue: [upstream],
      green: [],
      greenPercent: 0,
      ...(bodyTimeoutMs !== undefined ? { bodyTimeoutMs } : {}),
      updatedAt: 0,
    };
  const routesConf = renderNginxConfig(sidecar).text.replaceAll(
    'keepalive_timeout 0;',
    'keepalive_timeout 75s;',
  );
  await writeFile(path.join(dir, 'routes.conf'), routesConf);
  await runNginx(resources, { dir, binary: nginxBinary, workers: 1, errorLogLevel: 'info' });
}
