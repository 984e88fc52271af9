/**
 * Many machines (issue 30), as separate machines are: three hosts, each a network namespace of its
 * own (its own loopback and ports, reached only through its veth link: test/support/netns.ts),
 * each running `cutover worker --host NAME` with a state directory of its own. A router per host
 * serves routes: www on a's, api and wwwc on c's (wwwc to web too, so a shift of web sets a route
 * on each host's router, each on its own host). web runs on host b and api on host c, each
 * listening on its host's address (the process driver's `address`): the routers dial them across
 * the links. Migrate,
 * roll back and take down under load from outside every host: no failed request, every call on
 * its host, and nothing left running on any host.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, runCli, tempDir } from '../support/cli.js';
import { startTestLoad } from '../support/load.js';
import { copyFixture } from '../support/migrations.js';
import { createNetnsHosts, type NetnsHosts, netnsUnavailable } from '../support/netns.js';
import { temporalAddress, uniqueTaskQueue } from '../support/temporal-worker.js';

const unavailable = netnsUnavailable();
if (unavailable) throw new Error(`this test makes network namespaces: ${unavailable}`);

interface HostWorker {
  host: string;
  stateDir: string;
  child: ChildProcess;
  stderr(): string;
}

describe('three hosts, each a network namespace with its own worker and state directory', () => {
  let hosts: NetnsHosts | undefined;
  let cleanupDir: (() => Promise<void>) | undefined;
  const workers: HostWorker[] = [];

  afterAll(async () => {
    for (const w of workers)
      if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await hosts?.remove();
    await cleanupDir?.();
  }, 60_000);

  let file = '';
  let env: Record<string, string> = {};
  const cli = (args: string[]) => runCli([...args, '-f', file], { env });
  type Route = 'www' | 'api' | 'wwwc';
  // www on a's router; api, and web again (wwwc), on c's: a shift of web sets a route on each.
  const url = (route: Route) =>
    route === 'www'
      ? `http://${hosts?.address('a')}:18080/`
      : `http://${hosts?.address('c')}:${route === 'api' ? 18081 : 18082}/`;
  const served = async (route: Route) =>
    ((await (await fetch(url(route))).json()) as { version: string }).version;

  beforeAll(async () => {
    hosts = await createNetnsHosts(['a', 'b', 'c']);
    const h = hosts;
    const { dir, cleanup } = await tempDir('cutover-netns-');
    cleanupDir = cleanup;
    copyFixture(path.join(repoRoot, 'examples', 'app'), path.join(dir, 'app'));
    file = path.join(dir, 'topology.yaml');
    writeFileSync(file, topology(h, `netns-${process.pid}`, '1.0.0'));
    const taskQueue = uniqueTaskQueue('netns');
    env = { WORKFLOW_HOST: temporalAddress(), TEMPORAL_TASK_QUEUE: taskQueue };
    // The hosts reach the run's dev server (on the test's loopback) through a forward on the bridge.
    const temporal = await h.forward(temporalAddress());
    for (const host of ['a', 'b', 'c']) {
      workers.push(
        await startHostWorker(h, host, path.join(dir, `state-${host}`), {
          WORKFLOW_HOST: temporal,
          TEMPORAL_TASK_QUEUE: taskQueue,
        }),
      );
    }
  }, 90_000);

  it('migrate, roll back and down under load: no failed request, each call on its host, nothing left running', async () => {
    const h = hosts as NetnsHosts;
    const first = await cli(['topology', 'migrate', '--yes']);
    expect(first.code, `${first.stdout}${first.stderr}`).toBe(0);
    expect(await served('www')).toBe('1.0.0');
    expect(await served('api')).toBe('1.0.0');
    expect(await served('wwwc')).toBe('1.0.0');

    const loads = (['www', 'api', 'wwwc'] as const).map((route) => ({
      route,
      load: startTestLoad({ url: url(route), rate: 50 }),
    }));

    // Both components to 2.0.0: green starts on its own host, the router on a moves traffic.
    writeFileSync(file, topology(h, `netns-${process.pid}`, '2.0.0'));
    const plan = await cli(['topology', 'plan']);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain(
      'Hosts: component api on c, component web on b, route api on c, route www on a, route wwwc on c.',
    );
    expect(plan.stdout).not.toContain('Changed outside of cutover');
    const second = await cli(['topology', 'migrate', '--yes']);
    expect(second.code, `${second.stdout}${second.stderr}`).toBe(0);
    expect(await served('www')).toBe('2.0.0');
    expect(await served('api')).toBe('2.0.0');
    expect(await served('wwwc')).toBe('2.0.0');

    // 3.0.0 held for a commit, then rolled back: both routes back on 2.0.0.
    writeFileSync(file, topology(h, `netns-${process.pid}`, '3.0.0', 'manual'));
    const started = await cli(['topology', 'migrate', '--yes', '--detach']);
    expect(started.code, started.stderr).toBe(0);
    const id = /mig_[0-9a-z]+/.exec(started.stdout)?.[0] as string;
    await untilLifecycle(id, (l) => l === 'awaiting_commit' || isFinal(l), 90_000);
    expect(await served('www')).toBe('3.0.0');
    const rollback = await runCli(['topology', 'migration', 'rollback', id], { env });
    expect(rollback.code, `${rollback.stdout}${rollback.stderr}`).toBe(0);
    expect(await untilLifecycle(id, isFinal, 90_000)).toBe('rolled_back');
    expect(await served('www')).toBe('2.0.0');
    expect(await served('api')).toBe('2.0.0');
    expect(await served('wwwc')).toBe('2.0.0');

    for (const { route, load } of loads) {
      const result = await load.stop();
      expect(result.failed, `${route}: ${JSON.stringify(result.failures)}`).toBe(0);
      expect(result.requests).toBeGreaterThan(100);
    }

    // Every call on its host: replicas recorded on b (web) and c (api) only, the router on a only.
    const slots = (host: string) => {
      const envs = path.join(stateDirOf(host), 'environments');
      return existsSync(envs)
        ? readdirSync(envs).flatMap((e) => readdirSync(path.join(envs, e, 'slots')))
        : [];
    };
    expect(slots('b').length).toBeGreaterThan(0);
    expect(slots('b').every((s) => s.startsWith('web-'))).toBe(true);
    expect(slots('c').every((s) => s.startsWith('api-'))).toBe(true);
    expect(slots('a')).toEqual([]);
    expect(existsSync(path.join(stateDirOf('a'), 'router', 'routes.json'))).toBe(true);
    expect(existsSync(path.join(stateDirOf('c'), 'router', 'routes.json'))).toBe(true);
    expect(existsSync(path.join(stateDirOf('b'), 'router'))).toBe(false);

    // Status gathers each host's answer (each observed on its own host), and names the hosts.
    const status = await cli(['topology', 'status']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/web {2}2\.0\.0 {2}slot \w+ {2}on host b/);
    expect(status.stdout).toMatch(/api {2}2\.0\.0 {2}slot \w+ {2}on host c/);
    expect(status.stdout).toMatch(
      /www {2}198\.\d+\.\d+\.2:18080 → web {2}on host a {2}blue 100% \/ green 0%/,
    );
    const json = JSON.parse((await cli(['topology', 'status', '--json'])).stdout) as {
      components: { name: string; host?: string; replicas: { address: string; state: string }[] }[];
      routes: { name: string; host?: string; state: string }[];
    };
    const web = json.components.find((c) => c.name === 'web');
    expect(web?.host).toBe('b');
    expect(web?.replicas.map((r) => [r.address.split(':')[0], r.state])).toEqual([
      [h.address('b'), 'running'],
      [h.address('b'), 'running'],
    ]);
    expect(json.routes.map((r) => [r.name, r.host, r.state])).toEqual([
      ['api', 'c', 'served'],
      ['www', 'a', 'served'],
      ['wwwc', 'c', 'served'],
    ]);

    const down = await cli(['topology', 'down', '--yes']);
    expect(down.code, `${down.stdout}${down.stderr}`).toBe(0);
    // Nothing left on any host but its worker (the router exits a moment after its last route).
    for (const w of workers) {
      const deadline = Date.now() + 10_000;
      let others = h.pids(w.host).filter((pid) => pid !== w.child.pid);
      while (others.length > 0 && Date.now() < deadline) {
        await sleep(100);
        others = h.pids(w.host).filter((pid) => pid !== w.child.pid);
      }
      expect(others, `host ${w.host} still runs ${others.join(', ')}`).toEqual([]);
    }
    for (const w of workers) expect(w.stderr()).not.toMatch(/WARN|ERROR/);
  }, 300_000);

  function stateDirOf(host: string): string {
    return workers.find((w) => w.host === host)?.stateDir as string;
  }

  async function untilLifecycle(
    id: string,
    done: (lifecycle: string) => boolean,
    ms: number,
  ): Promise<string> {
    const deadline = Date.now() + ms;
    let lifecycle = '';
    while (Date.now() < deadline) {
      const shown = await runCli(['topology', 'migration', 'show', id, '--json'], { env });
      lifecycle = (JSON.parse(shown.stdout) as { state: { lifecycle: string } }).state.lifecycle;
      if (done(lifecycle)) return lifecycle;
      await sleep(300);
    }
    throw new Error(`${id} is still ${lifecycle} after ${ms} ms`);
  }
});

const isFinal = (lifecycle: string) =>
  ['completed', 'rolled_back', 'failed', 'cancelled'].includes(lifecycle);

/** The layout: the router on a serving www and api on a's address; web on b, api on c, each on its host's address. */
function topology(h: NetnsHosts, name: string, version: string, commit: 'auto' | 'manual' = 'auto'): string {
  const component = (driver: string) => `    driver: ${driver}
    version: "${version}"
    run: { command: [node, server.js], cwd: app }
    replicas: 2
    health: { http: { path: /healthz }, interval: 200ms, successThreshold: 2, failureThreshold: 3, deadline: 30s }`;
  return `apiVersion: cutover/v1
kind: Topology
metadata: { name: ${name} }
drivers:
  onb: { type: process, stopTimeout: 5s, runsOn: b, address: "${h.address('b')}" }
  onc: { type: process, stopTimeout: 5s, runsOn: c, address: "${h.address('c')}" }
  edge: { type: router, runsOn: a }
  edgec: { type: router, runsOn: c }
components:
  web:
${component('onb')}
  api:
${component('onc')}
routes:
  www: { listen: "${h.address('a')}:18080", to: web, driver: edge, shift: [50, 100], drain: { timeout: 5s } }
  api: { listen: "${h.address('c')}:18081", to: api, driver: edgec, shift: [50, 100], drain: { timeout: 5s } }
  wwwc: { listen: "${h.address('c')}:18082", to: web, driver: edgec, shift: [50, 100], drain: { timeout: 5s } }
strategy:
  commit: ${commit}
`;
}

/** `cutover worker --host NAME` inside the host's namespace, once it says it polls. */
async function startHostWorker(
  h: NetnsHosts,
  host: string,
  stateDir: string,
  env: Record<string, string>,
): Promise<HostWorker> {
  const [command = 'ip', ...prefix] = h.exec(host);
  const child = spawn(
    command,
    [
      ...prefix,
      process.execPath,
      path.join(repoRoot, 'bin', 'cutover.js'),
      'worker',
      '--host',
      host,
      '--state-dir',
      stateDir,
    ],
    { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const deadline = Date.now() + 30_000;
  while (!stderr.includes('cutover worker on')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`cutover worker on host ${host} did not start:\n${stderr}`);
    }
    await sleep(50);
  }
  return { host, stateDir, child, stderr: () => stderr };
}
