#!/usr/bin/env node
// `npm run demo`: a zero-downtime cutover you can watch, with the real CLI, in about half a minute.
//
//   1. v1 of a web app (two replicas, local processes) goes live behind cutover's router;
//   2. steady load (200 requests/s) runs against the route the whole time;
//   3. v2 is migrated in green-blue: health gate, traffic shifted 10% → 50% → 100%, blue drained;
//   4. a broken v3 fails its health gate and rolls back by itself: blue keeps serving;
//   5. the load result for each step (requests, failed, p50/p99, who answered), then everything
//      is torn down.
//
// It works on a scratch copy of examples/live-demo and examples/app, on a free port.
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatLoad, startLoad } from '../bench/load.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const bin = path.join(root, 'bin', 'cutover.js');
const color = process.stdout.isTTY && !process.env.NO_COLOR;
const bold = (s) => (color ? `\u001b[1m${s}\u001b[22m` : s);
const ratePerSecond = 200;

/** The cutover command running now, if any: Ctrl-C passes to it once (see interrupted). */
let running = null;
/** Set by Ctrl-C: the demo's steps stop, the clean-up runs. */
let stopping = false;

function cutover(args, { cwd, expect = [0], cleanup = false }) {
  // After Ctrl-C the demo's own steps start nothing more (a step waiting under load would otherwise
  // start the next migrate beside the clean-up's `down`); only the clean-up's commands run.
  if (stopping && !cleanup) return new Promise(() => {});
  process.stdout.write(`\n${bold(`$ cutover ${args.join(' ')}`)}\n`);
  return new Promise((resolve, reject) => {
    // In a process group of its own, so that Ctrl-C on the terminal reaches only the demo, which
    // passes it on exactly once (a second SIGINT would kill a migrate while it hands over).
    const child = spawn(process.execPath, [bin, ...args], { cwd, stdio: 'inherit', detached: true });
    running = child;
    child.on('exit', (code) => {
      if (running === child) running = null;
      if (expect.includes(code)) resolve(code);
      else reject(new Error(`cutover ${args[0]} ${args[1]} exited ${code}, expected ${expect.join(' or ')}`));
    });
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** The load running now, if any, so that Ctrl-C can stop it. */
let load = null;

/** Runs a migration under load; prints and returns the load result. */
async function underLoad(url, run) {
  load = startLoad({ url, rate: ratePerSecond });
  await new Promise((r) => setTimeout(r, 1000));
  await run();
  await new Promise((r) => setTimeout(r, 1000));
  const result = await load.stop();
  load = null;
  console.log(`\n${bold('load:')} ${formatLoad(result)}`);
  if (result.failed > 0) console.log(`  failures: ${JSON.stringify(result.failures)}`);
  return result;
}

const scratch = mkdtempSync(path.join(tmpdir(), 'cutover-demo-'));
cpSync(path.join(root, 'examples', 'live-demo'), path.join(scratch, 'live-demo'), { recursive: true });
cpSync(path.join(root, 'examples', 'app'), path.join(scratch, 'app'), { recursive: true });
const dir = path.join(scratch, 'live-demo');
const file = path.join(dir, 'topology.yaml');
const port = await freePort();
const edit = (f) => writeFileSync(file, f(readFileSync(file, 'utf8')));
edit((t) => t.replaceAll('127.0.0.1:18600', `127.0.0.1:${port}`));
const url = `http://127.0.0.1:${port}/`;

console.log(`Working in ${scratch}; Ctrl-C stops everything the demo started.\n`);

/**
 * Ctrl-C: stop everything the demo started, then exit 130. The migrate in progress hands its
 * migration to a background runner when interrupted; that migration is cancelled (blue keeps
 * serving until the end), then `down` stops every process and the router, and the scratch copy
 * goes.
 */
async function interrupted() {
  stopping = true;
  console.log(`\n${bold('Interrupted: stopping everything the demo started…')}`);
  await load?.stop().catch(() => {});
  if (running) {
    const child = running;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGINT');
    await exited;
  }
  const listed = spawnSync(process.execPath, [bin, 'topology', 'migration', 'list', '--json'], {
    cwd: dir,
    encoding: 'utf8',
  });
  const inFlight =
    listed.status === 0 ? JSON.parse(listed.stdout).items.filter((m) => m.endedAt === null) : [];
  for (const m of inFlight)
    await cutover(['topology', 'migration', 'cancel', m.id], {
      cwd: dir,
      expect: [0, 1],
      cleanup: true,
    }).catch(() => {});
  const down = await cutover(['topology', 'down', '--yes'], {
    cwd: dir,
    expect: [0, 1],
    cleanup: true,
  }).catch(() => 1);
  rmSync(scratch, { recursive: true, force: true });
  console.log(
    down === 0
      ? bold('Stopped: every process, the router and the scratch directory are gone.')
      : 'demo: `cutover topology down` did not succeed (see above); processes may be left running.',
  );
  process.exit(130);
}
process.once('SIGINT', () => void interrupted());

let failed = 0;
try {
  console.log(bold(`1. Version 1.0.0 goes live behind the router on ${url}`));
  await cutover(['topology', 'migrate', '--yes'], { cwd: dir });

  console.log(`\n${bold(`2. Version 2.0.0, migrated under a steady load of ${ratePerSecond} requests/s`)}`);
  edit((t) => t.replace('version: "1.0.0"', 'version: "2.0.0"'));
  await cutover(['topology', 'plan'], { cwd: dir });
  failed += (await underLoad(url, () => cutover(['topology', 'migrate', '--yes'], { cwd: dir }))).failed;

  console.log(
    `\n${bold('3. A broken 3.0.0 (its health check answers 503): the gate fails, blue keeps serving')}`,
  );
  edit((t) =>
    t
      .replace('version: "2.0.0"', 'version: "3.0.0"')
      .replace('    replicas: 2\n', '    replicas: 2\n    env: { UNHEALTHY: "1" }\n'),
  );
  failed += (await underLoad(url, () => cutover(['topology', 'migrate', '--yes'], { cwd: dir, expect: [1] })))
    .failed;

  await cutover(['topology', 'migration', 'list'], { cwd: dir });
  console.log(`\n${bold('4. Tear down')}`);
  await cutover(['topology', 'down', '--yes'], { cwd: dir });
  console.log(
    `\n${bold(failed === 0 ? 'Done: no request failed.' : `Done, but ${failed} requests failed.`)} Next: docs/getting-started.md.`,
  );
} catch (error) {
  // Interrupted: interrupted() stops everything and exits; this step's end is no failure.
  if (stopping) await new Promise(() => {});
  console.error(`demo: ${error.message}`);
  process.exitCode = 1;
  await cutover(['topology', 'down', '--yes'], { cwd: dir, expect: [0, 1] }).catch(() => {});
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
if (failed > 0) process.exitCode = 1;
