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
import { spawn } from 'node:child_process';
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

function cutover(args, { cwd, expect = [0] }) {
  process.stdout.write(`\n${bold(`$ cutover ${args.join(' ')}`)}\n`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { cwd, stdio: 'inherit' });
    child.on('exit', (code) => {
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

/** Runs a migration under load; prints and returns the load result. */
async function underLoad(url, run) {
  const load = startLoad({ url, rate: ratePerSecond });
  await new Promise((r) => setTimeout(r, 1000));
  await run();
  await new Promise((r) => setTimeout(r, 1000));
  const result = await load.stop();
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
    `\n${bold(failed === 0 ? 'Done: no request failed.' : `Done, but ${failed} requests failed.`)} Next: README.md.`,
  );
} catch (error) {
  console.error(`demo: ${error.message}`);
  process.exitCode = 1;
  await cutover(['topology', 'down', '--yes'], { cwd: dir, expect: [0, 1] }).catch(() => {});
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
if (failed > 0) process.exitCode = 1;
