/**
 * A port another program holds, for the commands that listen (issue 16, item 12): `cutover server`
 * ends at once with one line naming the address and exit 1, in local and in Temporal mode (where a
 * worker and a Temporal connection are already open when the listen fails); `cutover proxy` names
 * the address of the route it cannot serve, keeps serving the others, and takes the address once it
 * is free. (`cutover worker` listens on nothing: its faults are Temporal's, see
 * test/modes/temporal-unreachable.test.ts and test/temporal/search-attributes.test.ts.)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { repoRoot } from './support/cli.js';
import { freePort } from './support/migrations.js';
import { ServerHarness } from './support/server.js';
import { temporalAddress } from './support/temporal-worker.js';
import { eventually } from './support/wait.js';

const servers = new ServerHarness();
const holders: Server[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
  }
  for (const holder of holders.splice(0)) await closeHolder(holder);
  await servers.cleanup();
});

/** Another program's HTTP server on a free loopback port, answering `answer`. */
async function holdPort(answer = 'other program'): Promise<{ port: number; holder: Server }> {
  const holder = createServer((_req, res) => res.end(answer));
  holders.push(holder);
  await new Promise<void>((resolve, reject) => {
    holder.once('error', reject);
    holder.listen(0, '127.0.0.1', () => resolve());
  });
  return { port: (holder.address() as { port: number }).port, holder };
}

function closeHolder(holder: Server): Promise<void> {
  holder.closeAllConnections();
  return new Promise((resolve) => holder.close(() => resolve()));
}

const inUseLine = (port: number) =>
  `cutover: listen 127.0.0.1:${port}: the address is already in use (EADDRINUSE); stop the program listening there, or choose another port\n`;

describe('a port another program holds', () => {
  it('cutover server: one line naming the address, exit 1', async () => {
    const { port } = await holdPort();
    const result = await servers.startRefused({
      stateDir: await servers.stateDir(),
      args: ['--port', String(port)],
    });
    expect(result.listening).toBe(false);
    expect(result.stderr).toBe(inUseLine(port));
    expect(result.code).toBe(1);
  });

  it('cutover server in Temporal mode, with its worker running: one line, exit 1, no hang', async () => {
    const { port } = await holdPort();
    const started = Date.now();
    const result = await servers.startRefused({
      stateDir: await servers.stateDir(),
      args: ['--port', String(port)],
      env: { WORKFLOW_HOST: temporalAddress(), TEMPORAL_TASK_QUEUE: `port-in-use-${process.pid}` },
    });
    expect(result.listening).toBe(false);
    expect(result.stderr).toBe(inUseLine(port));
    expect(result.code).toBe(1);
    // The worker and the connection it had opened are closed, not left holding the process open.
    expect(Date.now() - started).toBeLessThan(15_000);
  }, 40_000);

  it('cutover proxy: names the route and the address, serves the other routes, takes it once free', async () => {
    const stateDir = await servers.stateDir();
    const upstream = await holdPort('upstream');
    const { port: taken, holder } = await holdPort();
    const free = await freePort();
    const entry = (listen: string) => ({
      environment: 'shop',
      listen,
      component: 'web',
      blue: [`127.0.0.1:${upstream.port}`],
      green: [],
      greenPercent: 0,
      drainTimeoutMs: 0,
      updatedAt: 1,
    });
    mkdirSync(path.join(stateDir, 'router'), { recursive: true });
    writeFileSync(
      path.join(stateDir, 'router', 'routes.json'),
      JSON.stringify({
        version: 1,
        routes: { 'shop/held': entry(`127.0.0.1:${taken}`), 'shop/open': entry(`127.0.0.1:${free}`) },
      }),
    );
    const proxy = spawn(
      process.execPath,
      [path.join(repoRoot, 'bin', 'cutover.js'), 'proxy', '--state-dir', stateDir],
      {
        cwd: repoRoot,
        env: { ...process.env, NO_COLOR: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    children.push(proxy);
    let output = '';
    proxy.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
    });
    proxy.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
    });
    await eventually(
      () => /router for .* \(pid \d+, control port \d+\)/.test(output),
      15_000,
      () => output,
    );
    expect(output).toContain(
      `router: cannot listen on 127.0.0.1:${taken} for shop/held: the address is already in use (EADDRINUSE); stop the program listening there, or choose another port\n`,
    );
    expect(output).not.toMatch(/internal error/);
    expect(await body(free)).toBe('upstream'); // the open route, proxied
    expect(await body(taken)).toBe('other program'); // still the holder itself

    // The router answers on the held address once the other program lets it go.
    await closeHolder(holder);
    holders.splice(holders.indexOf(holder), 1);
    await eventually(
      async () => (await body(taken).catch(() => null)) === 'upstream',
      15_000,
      () => output,
    );
    expect(proxy.exitCode).toBeNull();
  });
});

async function body(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/`, { headers: { connection: 'close' } })).text();
}
