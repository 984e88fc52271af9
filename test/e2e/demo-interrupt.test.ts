/**
 * Ctrl-C in `npm run demo` stops everything the demo started: a real SIGINT to the demo process
 * while its second migration runs under load, then every process it started, its route's port and
 * its scratch directory are gone.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { isAlive, type ProcessIdentity, processIdentity } from '../../platform/process-identity.js';
import { repoRoot } from '../support/cli.js';
import { killChild, killRecorded } from '../support/processes.js';
import { waitUntil } from '../support/wait.js';

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

/** Sends GET /slow?ms=N through the route; resolves once it is on the wire (its answer is not awaited). */
function slowRequestSent(port: number, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(`GET /slow?ms=${ms} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`, () =>
        resolve(),
      );
    });
    socket.on('error', () => {}); // cut when everything stops: expected
    slowSockets.push(socket);
  });
}
const slowSockets: Socket[] = [];

let demo: ChildProcess | undefined;
let started: ProcessIdentity[] = [];
let scratch = '';
afterEach(async () => {
  for (const socket of slowSockets.splice(0)) socket.destroy();
  if (demo) await killChild(demo);
  for (const one of started.splice(0)) killRecorded(one);
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** The demo, started with its output collected; `seen` waits for a pattern in it. */
function startDemo() {
  const child = spawn(process.execPath, [path.join(repoRoot, 'examples', 'demo.js')], {
    cwd: repoRoot,
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  demo = child;
  const run = { output: '', seen: (_: RegExp): Promise<RegExpMatchArray> => Promise.reject(new Error()) };
  run.seen = (pattern: RegExp) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const look = () => {
        const match = run.output.match(pattern);
        if (match) {
          child.stdout?.off('data', look);
          child.stderr?.off('data', look);
          resolve(match);
        }
      };
      child.stdout?.on('data', look);
      child.stderr?.on('data', look);
      child.once('exit', () => reject(new Error(`the demo ended first:\n${run.output}`)));
      look();
    });
  child.stdout?.on('data', (chunk: Buffer) => {
    run.output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    run.output += chunk.toString();
  });
  return run;
}

/** Ctrl-C to the demo; resolves with its exit code. */
async function interrupt(): Promise<number | null> {
  const child = demo as ChildProcess;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGINT');
  const code = await exited;
  demo = undefined;
  return code;
}

it('Ctrl-C stops every process the demo started, frees its port, removes its scratch copy, and says so', async () => {
  const run = startDemo();
  scratch = (await run.seen(/Working in (\S+);/))[1] as string;
  const port = Number((await run.seen(/behind the router on http:\/\/127\.0\.0\.1:(\d+)\//))[1]);
  // The second migration (2.0.0) is under way, under load.
  await run.seen(/Migration mig_\w+ started[\s\S]*Migration mig_\w+ started/);
  started = processesUnder(scratch).map(processIdentity);
  expect(started.length).toBeGreaterThan(2); // the router, the app's replicas, the migrate
  expect(await refused(port)).toBe(false);

  expect(await interrupt()).toBe(130);
  const output = run.output;
  expect(output).toContain('Interrupted: stopping everything the demo started');
  expect(output).toContain('Stopped: every process, the router and the scratch directory are gone.');
  // Reaped or not (an exited process whose parent went first waits as a zombie for init): not running.
  expect(await waitUntil(() => started.filter(isAlive).length === 0, 10_000), output).toBe(true);
  expect(await refused(port)).toBe(true);
  expect(existsSync(scratch)).toBe(false);
}, 120_000);

it('Ctrl-C between two commands (the load running, the next migrate not yet started) starts nothing more', async () => {
  const run = startDemo();
  scratch = (await run.seen(/Working in (\S+);/))[1] as string;
  const port = Number((await run.seen(/behind the router on http:\/\/127\.0\.0\.1:(\d+)\//))[1]);
  // Step 2's plan has ended: the demo now waits a second under load before it migrates.
  await run.seen(/2\. Version 2\.0\.0[\s\S]*\$ cutover topology plan[\s\S]*plan id sha256:\w+\n/);
  started = processesUnder(scratch).map(processIdentity);
  // A long request in flight makes the clean-up's `down` wait for it (blue drains), as real traffic would.
  await slowRequestSent(port, 4_000);
  expect(await interrupt()).toBe(130);
  const afterInterrupt = run.output.slice(run.output.indexOf('Interrupted:'));
  expect(afterInterrupt).toContain('Stopped: every process, the router and the scratch directory are gone.');
  // Only the clean-up's own commands ran after Ctrl-C, not the demo's next step.
  expect(afterInterrupt).not.toContain('$ cutover topology migrate');
  expect(await waitUntil(() => started.filter(isAlive).length === 0, 10_000), run.output).toBe(true);
  expect(processesUnder(scratch)).toEqual([]);
  expect(await refused(port)).toBe(true);
}, 120_000);
