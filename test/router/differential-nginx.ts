/**
 * A real nginx for the differential test, configured as the nginx route driver configures a route
 * (its own renderNginxConfig), one worker, everything under a temp dir, in the foreground as a child
 * of the test, stopped by its pid.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { renderNginxConfig, type Sidecar } from '../../engine/drivers/nginx-driver.js';
import { environment, type Resources, stateDirFor } from './support.js';

export const nginxBinary = '/usr/sbin/nginx';
const nginxStartTimeoutMs = 10_000;
const nginxStopTimeoutMs = 5_000;

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
  const conf = path.join(dir, 'nginx.conf');
  const errorLog = path.join(dir, 'error.log');
  const temp = (name: string) => `    ${name}_temp_path ${path.join(dir, name)};`;
  await writeFile(path.join(dir, 'routes.conf'), routesConf);
  await writeFile(
    conf,
    [
      // As root, workers would run as nobody and could not write the temp dirs (mkdtemp: 0700).
      ...(process.getuid?.() === 0 ? ['user root;'] : []),
      `pid ${path.join(dir, 'nginx.pid')};`,
      `error_log ${errorLog} info;`,
      'worker_processes 1;',
      'events {}',
      'http {',
      '    access_log off;',
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(temp),
      `    include ${path.join(dir, 'routes.conf')};`,
      '}',
      '',
    ].join('\n'),
  );
  const child = spawn(nginxBinary, ['-p', dir, '-c', conf, '-e', errorLog, '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  resources.add(() => stopNginx(child));
  let stderr = '';
  child.stderr?.on('data', (data: Buffer) => {
    stderr += data.toString();
  });
  const deadline = Date.now() + nginxStartTimeoutMs;
  while (!existsSync(path.join(dir, 'nginx.pid'))) {
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`nginx did not start: ${stderr}${await readFile(errorLog, 'utf8').catch(() => '')}`);
    await sleep(20);
  }
}

/** SIGTERM is nginx's fast shutdown (SIGQUIT would wait for keep-alive clients). */
async function stopNginx(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = once(child, 'exit');
  process.kill(child.pid, 'SIGTERM');
  const timer = setTimeout(
    () => child.pid !== undefined && process.kill(child.pid, 'SIGKILL'),
    nginxStopTimeoutMs,
  );
  await exited;
  clearTimeout(timer);
}
