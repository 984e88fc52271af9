/**
 * A process replica that dies after its start-up grace fails the health gate with only "connection
 * refused" to go on: the gate's failure quotes what each replica wrote, and where its log is (issue
 * 29, tried as a newcomer: `python3 no-such-file.py` through a pyenv shim took 0.3 to 0.7 s to exit,
 * past the 300 ms grace, and the user had to find replica-0.log under .cutover/ alone).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { logTail } from '../../../engine/drivers/server-slot.js';
import { runCli, tempDir } from '../../support/cli.js';
import { freePort, killRunners, killSlots } from '../../support/migrations.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/**
 * A directory for a topology and its state, taken down and removed after the test (`also` first,
 * with the directory, for what the test started outside cutover).
 */
async function gateWorkspace(
  also?: (dir: string) => Promise<void>,
): Promise<{ dir: string; file: string; stateDir: string }> {
  const { dir, cleanup } = await tempDir();
  const file = path.join(dir, 'topology.yaml');
  const stateDir = path.join(dir, '.cutover');
  cleanups.push(async () => {
    await runCli(['topology', 'down', '-f', file, '--yes']).catch(() => undefined);
    killSlots(stateDir);
    killRunners(stateDir);
    await also?.(dir);
    await cleanup();
  });
  return { dir, file, stateDir };
}

it('a failed gate quotes what the exited replica wrote, naming its log', { timeout: 60_000 }, async () => {
  const { dir, file, stateDir } = await gateWorkspace();
  // Says why on stderr at once, then exits after the start-up grace (300 ms), never listening.
  writeFileSync(
    path.join(dir, 'app.js'),
    "console.error('app: cannot read config.json'); setTimeout(() => process.exit(2), 500);\n",
  );
  const port = await freePort();
  writeFileSync(file, gateTopology('gateout', port));
  const run = await runCli(['topology', 'migrate', '-f', file, '--yes']);
  expect(run.code, run.stderr).toBe(1);
  // Connection refused is all a probe sees; the failure says the replica is gone.
  expect(run.stdout).toMatch(
    /failed: health gate failed for web: .* connection refused \(3 failures in a row\); 127\.0\.0\.1:\d+ \(pid \d+\) is not running \(exited\)$/m,
  );
  const log = path.join(stateDir, 'environments', 'gateout', 'slots');
  expect(run.stderr).toMatch(
    new RegExp(`output of green web replica 0 \\(${log}/web-mig_[0-9a-z]+/replica-0\\.log\\), last lines:`),
  );
  expect(run.stderr).toContain('[web green/0] app: cannot read config.json');
  // The same lines stay in the migration's log, for `migration logs` later.
  const id = /^(mig_[0-9a-z]+): failed/m.exec(run.stdout)?.[1] as string;
  const logs = await runCli(['topology', 'migration', 'logs', id, '-f', file]);
  expect(logs.stdout).toContain('[web green/0] app: cannot read config.json');
});

it("a gate answered by another process on the replica's port fails, naming the replica that is gone", {
  timeout: 60_000,
}, async () => {
  // The other process leaves its group: the test starts it (through the app), the test ends it.
  const { dir, file } = await gateWorkspace(async (dir) => {
    const otherPid = path.join(dir, 'other.pid');
    if (!existsSync(otherPid)) return;
    try {
      process.kill(Number(readFileSync(otherPid, 'utf8')), 'SIGKILL');
    } catch {}
  });
  // The replica hands its port to a process of its own that leaves its group (as a daemonizing
  // server does) and exits after the start-up grace (300 ms); that process listens once the replica
  // is gone: the address answers the gate's probes, not from the replica.
  writeFileSync(
    path.join(dir, 'other.js'),
    "setTimeout(() => require('node:http').createServer((q, s) => s.end('ok')).listen(Number(process.env.PORT), '127.0.0.1'), 700);\n",
  );
  writeFileSync(
    path.join(dir, 'app.js'),
    `const other = require('node:child_process').spawn(process.execPath, ['other.js'], { detached: true, stdio: 'ignore' });
require('node:fs').writeFileSync('other.pid', String(other.pid));
other.unref();
setTimeout(() => process.exit(0), 500);
`,
  );
  const port = await freePort();
  writeFileSync(file, gateTopology('answered', port));
  const run = await runCli(['topology', 'migrate', '-f', file, '--yes']);
  // Before: the gate passed on the other process's answers and the migration completed, its route
  // sending to a process cutover neither started nor could stop.
  expect(run.code, `${run.stdout}${run.stderr}`).toBe(1);
  expect(run.stdout).toMatch(
    /failed: health gate failed for web: 127\.0\.0\.1:\d+ \(pid \d+\) is not running \(exited\), yet its address answered the health check: another process answers there/m,
  );
  expect(run.stdout).not.toMatch(/completed/);
});

it('a replica that runs but listens on a port of its own: the failure says it does not listen on PORT', {
  timeout: 60_000,
}, async () => {
  const { dir, file } = await gateWorkspace();
  // A newcomer's app with its port written in (python3 -m http.server 8000, a framework's 3000):
  // alive all along, answering elsewhere.
  const own = await freePort();
  writeFileSync(
    path.join(dir, 'app.js'),
    `require('node:http').createServer((q, s) => s.end('ok')).listen(${own}, '127.0.0.1');\n`,
  );
  writeFileSync(file, gateTopology('ownport', await freePort()));
  const run = await runCli(['topology', 'migrate', '-f', file, '--yes']);
  expect(run.code, `${run.stdout}${run.stderr}`).toBe(1);
  expect(run.stdout).toMatch(
    /failed: health gate failed for web: .* connection refused \(3 failures in a row\); 127\.0\.0\.1:\d+ \(pid \d+\) runs but does not answer there \(connection refused; it does not listen on the port cutover gave it in PORT\)$/m,
  );
});

it('reads a long log from its end: whole last lines, not the whole file', async () => {
  const { dir, cleanup } = await tempDir();
  cleanups.push(cleanup);
  const file = path.join(dir, 'replica-0.log');
  const early = Array.from({ length: 20_000 }, (_, i) => `line ${i} ${'x'.repeat(40)}`);
  writeFileSync(file, `${[...early, 'next to last', 'last'].join('\n')}\n`);
  expect(await logTail(file, 3)).toEqual([early.at(-1), 'next to last', 'last']);
  expect(await logTail(path.join(dir, 'none.log'), 3)).toEqual([]);
});

/** One process component `web` (`node app.js`) behind route www on `port`, probed every 200 ms. */
function gateTopology(name: string, port: number): string {
  return `apiVersion: cutover/v1
kind: Topology
metadata:
  name: ${name}
drivers:
  local: { type: process }
components:
  web:
    driver: local
    version: "1"
    run: { command: [node, app.js] }
    health:
      http: { path: /healthz }
      interval: 200ms
      deadline: 10s
routes:
  www: { listen: 127.0.0.1:${port}, to: web }
`;
}
