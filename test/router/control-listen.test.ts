/**
 * `cutover proxy --control-listen`: the control API and /metrics on a fixed address, kept in the
 * state directory, so a router started again without the flag (by hand, by a supervisor, by a
 * migration) comes back on it and a real Prometheus scraping it keeps its series across the restart.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { controlSettingsPath } from '../../router/control-address.js';
import { readRouterRecord } from '../../router/router-record.js';
import { repoRoot, runBinary } from '../support/cli.js';
import { startPrometheus } from '../support/prometheus.js';
import {
  eventually,
  freeListen,
  freePort,
  killChild,
  resourcesPerTest,
  send,
  setRoute,
  startUpstream,
  stateDirFor,
} from './support.js';

const resources = resourcesPerTest();
const bin = path.join(repoRoot, 'bin', 'cutover.js');

/** `cutover proxy` as a user runs it, until it says it serves; killed by pid at cleanup. */
async function startProxy(stateDir: string, flags: string[] = []): Promise<ChildProcess> {
  if (!existsSync(path.join(repoRoot, 'dist', 'cli', 'wire-process.js')))
    throw new Error('dist/ is missing: run `npm run build` first');
  const child = spawn(process.execPath, [bin, 'proxy', '--state-dir', stateDir, ...flags], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  resources.add(() => killChild(child));
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (data: Buffer) => {
      output += data.toString();
      if (/router for .* \(pid \d+, control port \d+\)/.test(output)) resolve();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`cutover proxy exited (${code}): ${output}`)));
  });
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

it('keeps its control address across restarts, and Prometheus its series', async () => {
  const stateDir = await stateDirFor(resources);
  const upstream = await startUpstream(resources, 'blue');
  const listen = await freeListen();
  await setRoute(stateDir, 'web', { listen, blue: [upstream.address], green: [], greenPercent: 0 });
  const control = `127.0.0.1:${await freePort()}`;
  const port = Number(control.split(':')[1]);

  const first = await startProxy(stateDir, ['--control-listen', control]);
  expect(readRouterRecord(stateDir)?.port).toBe(port);
  expect(JSON.parse(readFileSync(controlSettingsPath(stateDir), 'utf8'))).toEqual({ listen: control });
  const prometheus = await startPrometheus(resources, control);
  const series = `cutover_route_requests_total{instance="${control}",route="web",slot="blue"}`;
  for (let i = 0; i < 5; i++) expect((await send(listen)).status).toBe(200);
  await eventually(async () => (await prometheus.query(series)) === 5, 30_000);

  // Stopped and started again without the flag, as a supervisor or a migration starts it.
  await stop(first);
  await startProxy(stateDir);
  expect(readRouterRecord(stateDir)?.port).toBe(port);
  for (let i = 0; i < 3; i++) expect((await send(listen)).status).toBe(200);
  // The same series (same job, instance and labels) carries both routers' counts: one reset, 3 now.
  await eventually(async () => (await prometheus.query(series)) === 3, 30_000);
  expect(await prometheus.query(`resets(${series}[10m])`)).toBe(1);
  expect(
    await prometheus.query(`changes(cutover_router_start_time_seconds{instance="${control}"}[10m])`),
  ).toBe(1);
  expect(await prometheus.query(`count(count_over_time(${series}[10m]))`)).toBe(1);
});

it('says what is wrong with a control address it cannot take', async () => {
  const stateDir = await stateDirFor(resources);
  const bad = await runBinary(['proxy', '--state-dir', stateDir, '--control-listen', 'localhost']);
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toContain('--control-listen: "localhost" is not host:port');
  // Another program holds the address: one line naming it, the cause and what to do.
  const holder = `127.0.0.1:${await freePort()}`;
  const taken = await startProxy(await stateDirFor(resources), ['--control-listen', holder]);
  const busy = await runBinary(['proxy', '--state-dir', stateDir, '--control-listen', holder]);
  expect(busy.code).not.toBe(0);
  expect(busy.stderr).toContain(`the router's control API cannot listen on ${holder}: the address is in use`);
  expect(existsSync(controlSettingsPath(stateDir))).toBe(false);
  await stop(taken);
});
