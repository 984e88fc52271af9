/**
 * Ctrl-C in `npm run demo` stops everything the demo started: a real SIGINT to the demo process
 * while its second migration runs under load, then every process it started, its route's port and
 * its scratch directory are gone.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';
import { alive, killChild } from '../support/processes.js';
import { waitUntil } from '../support/wait.js';

/** Whether a process runs: it exists and is not a zombie. */
function running(pid: number): boolean {
  if (!alive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Every process whose working directory or command line is under `dir`. */
function processesUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cwd.startsWith(dir) || cmdline.includes(dir)) pids.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids;
}

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });

let demo: ChildProcess | undefined;
let started: number[] = [];
let scratch = '';
afterEach(async () => {
  if (demo) await killChild(demo);
  for (const pid of started) if (alive(pid)) process.kill(pid, 'SIGKILL');
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

it('Ctrl-C stops every process the demo started, frees its port, removes its scratch copy, and says so', async () => {
  demo = spawn(process.execPath, [path.join(repoRoot, 'examples', 'demo.js')], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const seen = (pattern: RegExp) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const look = () => {
        const match = output.match(pattern);
        if (match) {
          demo?.stdout?.off('data', look);
          demo?.stderr?.off('data', look);
          resolve(match);
        }
      };
      demo?.stdout?.on('data', look);
      demo?.stderr?.on('data', look);
      demo?.once('exit', () => reject(new Error(`the demo ended first:\n${output}`)));
      look();
    });
  demo.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  demo.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  scratch = (await seen(/Working in (\S+);/))[1] as string;
  const port = Number((await seen(/behind the router on http:\/\/127\.0\.0\.1:(\d+)\//))[1]);
  // The second migration (2.0.0) is under way, under load.
  await seen(/Migration mig_\w+ started[\s\S]*Migration mig_\w+ started/);
  started = processesUnder(scratch);
  expect(started.length).toBeGreaterThan(2); // the router, the app's replicas, the migrate
  expect(await refused(port)).toBe(false);

  const exited = new Promise<number | null>((resolve) => demo?.once('exit', (code) => resolve(code)));
  demo.kill('SIGINT');
  expect(await exited).toBe(130);
  demo = undefined;
  expect(output).toContain('Interrupted: stopping everything the demo started');
  expect(output).toContain('Stopped: every process, the router and the scratch directory are gone.');
  // Reaped or not (an exited process whose parent went first waits as a zombie for init): not running.
  expect(await waitUntil(() => started.filter(running).length === 0, 10_000), output).toBe(true);
  expect(await refused(port)).toBe(true);
  expect(existsSync(scratch)).toBe(false);
}, 120_000);
