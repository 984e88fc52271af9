/**
 * A real nginx for the tests: in the foreground as a child of the test, everything (config, pid,
 * error log, temp dirs) under a directory of its own, its routes in `routes.conf` there, stopped
 * by its pid at cleanup.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Resources } from './resources.js';
import { waitUntil } from './wait.js';

/** How long nginx may take to write its pid file on a loaded machine. */
const nginxStartTimeoutMs = 10_000;
/** How long a SIGTERM'd nginx may take before it is killed. */
const nginxStopTimeoutMs = 5_000;

export interface NginxOptions {
  /** Where everything lives; `routes.conf` there is included in the http block. */
  dir: string;
  /** The program: `nginx` on PATH unless given. */
  binary?: string;
  workers: number;
  errorLogLevel: 'info' | 'notice';
}

export interface RunningNginx {
  /** The command line that addresses this nginx (`-s reload` after it reloads it). */
  argv: string[];
  errorLog: string;
}

/** Writes `nginx.conf` under `options.dir` and runs nginx on it; resolves once it wrote its pid file. */
export async function runNginx(resources: Resources, options: NginxOptions): Promise<RunningNginx> {
  const { dir } = options;
  const conf = path.join(dir, 'nginx.conf');
  const errorLog = path.join(dir, 'error.log');
  const pidFile = path.join(dir, 'nginx.pid');
  const temp = (name: string) => `    ${name}_temp_path ${path.join(dir, name)};`;
  await writeFile(
    conf,
    [
      // As root, workers would run as nobody and could not write the temp dirs (mkdtemp: 0700).
      ...(process.getuid?.() === 0 ? ['user root;'] : []),
      `pid ${pidFile};`,
      `error_log ${errorLog} ${options.errorLogLevel};`,
      `worker_processes ${options.workers};`,
      'events {}',
      'http {',
      '    access_log off;',
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(temp),
      `    include ${path.join(dir, 'routes.conf')};`,
      '}',
      '',
    ].join('\n'),
  );
  // -e: the error log before the config is read (else /var/log/nginx); same args for -s reload.
  const argv = [options.binary ?? 'nginx', '-p', dir, '-c', conf, '-e', errorLog];
  const child = spawn(argv[0] as string, [...argv.slice(1), '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  resources.add(() => stopNginx(child));
  let stderr = '';
  child.stderr?.on('data', (data: Buffer) => {
    stderr += data.toString();
  });
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  if (!(await waitUntil(() => existsSync(pidFile) || exited, nginxStartTimeoutMs)) || !existsSync(pidFile)) {
    throw new Error(`nginx did not start: ${stderr}${await readFile(errorLog, 'utf8').catch(() => '')}`);
  }
  return { argv, errorLog };
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
