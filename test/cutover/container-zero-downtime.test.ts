/**
 * The promise with containers as the component: the real router, real load (500 requests/s over
 * keep-alive) and a real Podman, through a migration (1.0.0 → 2.0.0 images), a rollback to the
 * previous layout, a broken image whose health check fails, and SIGKILL of the runner during the
 * gate then `resume`. Not one failed request; after each, only the live slot's containers are left.
 *
 * One environment and one router serve all the scenarios, in order (each starts from the layout
 * the one before left), to keep the file short.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadResult } from '../../bench/load.js';
// Migrations under load run in their own process (runBinary), as a user runs them: in-process they
// would share this process's CPU with the load, which would then not keep its rate.
import { runBinary, runCli } from '../support/cli.js';
import { minSentShare, sentRate, startTestLoad } from '../support/load.js';
import { freePort, killRunners, type Summary, show, type Workspace } from '../support/migrations.js';
import { type PodmanFixture, podmanFixture } from '../support/podman.js';

const rate = 500;
/** Load before and after the operation: enough requests on each side to see who served them. */
const loadMarginMs = 500;

let fx: PodmanFixture;
let dir: string;
let file: string;
let url: string;
let listen: string;
let holdDir: string;
const environment = () => `${fx.prefix}-zd`;
const ws = (): Workspace => ({ dir, file, stateDir: path.join(dir, '.cutover'), cleanup: async () => {} });

beforeAll(async () => {
  fx = await podmanFixture();
  await fx.build('1', 'one');
  await fx.build('2', 'two');
  await fx.build('broken', 'unhealthy');
  dir = await mkdtemp(path.join(tmpdir(), 'cutover-container-zd-'));
  file = path.join(dir, 'topology.yaml');
  holdDir = path.join(dir, 'hold');
  mkdirSync(holdDir);
  listen = `127.0.0.1:${await freePort()}`;
  url = `http://${listen}/`;
  write({ version: '1.0.0', tag: '1' });
  const first = await runCli(['topology', 'migrate', '-f', file, '--yes']);
  expect(first.code, first.stderr).toBe(0);
}, 120_000);

afterAll(async () => {
  if (dir) {
    await runCli(['topology', 'down', '-f', file, '--yes']).catch(() => undefined);
    killRunners(path.join(dir, '.cutover'));
  }
  await fx?.cleanup([environment()]);
  if (dir) await rm(dir, { recursive: true, force: true });
}, 120_000);

function write(o: { version: string; tag: string; env?: Record<string, string> }): void {
  const env = { VERSION: o.version, ...o.env };
  writeFileSync(
    file,
    `apiVersion: cutover/v1
kind: Topology
metadata: { name: ${environment()} }
drivers:
  ctr: { type: container, engine: podman, runtime: runc, config: ${JSON.stringify(fx.config)}, stopTimeout: 2s }
components:
  web:
    driver: ctr
    version: "${o.version}"
    image: ${fx.image(o.tag)}
    pull: never
    replicas: 2
    ports: [{ container: 8080 }]
    env: ${JSON.stringify(env)}
    volumes: ["${holdDir}:/hold"]
    health: { http: { path: /health }, interval: 100ms, successThreshold: 2, failureThreshold: 3, deadline: 30s }
routes:
  public: { listen: "${listen}", to: web, drain: { timeout: 2s } }
`,
  );
}

interface Run extends LoadResult {
  startedAt: number;
}

async function underLoad(during: () => Promise<void>): Promise<Run> {
  const startedAt = Date.now();
  const load = startTestLoad({ url, rate });
  await sleep(loadMarginMs);
  await during();
  await sleep(loadMarginMs);
  return { ...(await load.stop()), startedAt };
}

/** Versions served by requests that ended after `at` (epoch ms). */
function versionsAfter(run: Run, at: number): Set<string | undefined> {
  return new Set(run.records.filter((r) => run.startedAt + (r.doneAt ?? 0) > at + 50).map((r) => r.version));
}

function expectNoFailures(run: Run): void {
  expect(run.failures.slice(0, 5)).toEqual([]);
  expect(run.failed).toBe(0);
  // The figure: 500 requests/s. The generator runs in a process of its own (`ownProcess`:
  // in this process, beside two other files on 2 cores, it lagged behind its schedule, ci18: 427/s,
  // and starved at three, ci19), but still shares the cores: 80 % of it is still the load the
  // cutover is judged under.
  expect(sentRate(run)).toBeGreaterThanOrEqual(rate * minSentShare);
}

/** Every container of the environment, with its slot label. */
async function containers(): Promise<{ name: string; slot: string }[]> {
  const out = await fx.podman([
    'ps',
    '-a',
    '--filter',
    `label=dev.cutover.environment=${environment()}`,
    '--format',
    '{{.Names}} {{index .Labels "dev.cutover.slot"}}',
  ]);
  return out.stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [name = '', slot = ''] = l.trim().split(' ');
      return { name, slot };
    });
}

/** Only the live slot's two replicas are left, and they serve `version` through the route. */
async function expectOnlyLive(version: string, slotId?: string): Promise<void> {
  const left = await containers();
  expect(left).toHaveLength(2);
  expect(new Set(left.map((c) => c.slot)).size).toBe(1);
  if (slotId) expect(left[0]?.slot).toBe(slotId);
  const body = (await (await fetch(url)).json()) as { version: string };
  expect(body.version).toBe(version);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const idOf = (stdout: string) => /^(mig_[0-9a-z]+): (completed|failed)/m.exec(stdout)?.[1] as string;

async function waitUntil(id: string, predicate: (s: Summary) => boolean, timeoutMs = 40_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await show(ws(), id);
    if (predicate(s)) return s;
    if (Date.now() > deadline) throw new Error(`timed out; last: ${JSON.stringify(s)}`);
    await sleep(100);
  }
}

describe('zero-downtime cutover of container components through the router (real podman)', () => {
  it('1.0.0 → 2.0.0 images under load: zero failed, all 2.0.0 afterwards, blue removed', async () => {
    write({ version: '2.0.0', tag: '2' });
    let endedAt = 0;
    let id = '';
    const run = await underLoad(async () => {
      const result = await runBinary(['topology', 'migrate', '-f', file, '--yes']);
      expect(result.code, result.stderr).toBe(0);
      endedAt = Date.now();
      id = idOf(result.stdout);
    });
    expectNoFailures(run);
    expect(run.versions['1.0.0']).toBeGreaterThan(0);
    expect(versionsAfter(run, endedAt)).toEqual(new Set(['2.0.0']));
    await expectOnlyLive('2.0.0', id);
  }, 90_000);

  it('rollback --to previous after the cutover, under load: zero failed, all 1.0.0 afterwards', async () => {
    let endedAt = 0;
    const run = await underLoad(async () => {
      const result = await runBinary(['topology', 'rollback', '--to', 'previous', '-f', file, '--yes']);
      expect(result.code, result.stderr).toBe(0);
      endedAt = Date.now();
    });
    expectNoFailures(run);
    expect(run.versions['2.0.0']).toBeGreaterThan(0);
    expect(versionsAfter(run, endedAt)).toEqual(new Set(['1.0.0']));
    await expectOnlyLive('1.0.0');
  }, 90_000);

  it('a broken image whose health check fails: rolled back, zero failed, no request reached it, its containers gone', async () => {
    const before = await containers();
    write({ version: '3.0.0', tag: 'broken' });
    let id = '';
    const run = await underLoad(async () => {
      const result = await runBinary(['topology', 'migrate', '-f', file, '--yes']);
      expect(result.code).toBe(1);
      expect(result.stdout).toMatch(/failed: health gate failed for web: .*GET \/health → 404/);
      id = idOf(result.stdout);
    });
    // What the failed replicas wrote is in the migration's log, where one looks first.
    const logs = await runCli(['topology', 'migration', 'logs', id, '-f', file]);
    expect(logs.stdout).toContain(
      `output of green web replica 0 (cutover-${environment()}-web-${id}-0), last lines:`,
    );
    expect(logs.stdout).toMatch(/\[web green\/1\] app 3\.0\.0 \(unhealthy\) listening on 8080/);
    expect(logs.stdout).toContain('[web green/1] no /health: this build cannot reach its database');
    expectNoFailures(run);
    expect(Object.keys(run.versions)).toEqual(['1.0.0']);
    expect(run.records.filter((r) => r.slot === 'green')).toEqual([]);
    expect(await containers()).toEqual(before);
    await expectOnlyLive('1.0.0');
  }, 90_000);

  it('SIGKILL of the runner while the gate is held, then resume: zero failed, ends on 2.0.0', async () => {
    const hold = path.join(holdDir, 'release');
    write({ version: '2.0.0', tag: '2', env: { HOLD_FILE: '/hold/release' } });
    let id = '';
    let endedAt = 0;
    const run = await underLoad(async () => {
      const started = await runBinary(['topology', 'migrate', '-f', file, '--yes', '--detach']);
      expect(started.code, started.stderr).toBe(0);
      id = started.stdout.trim();
      // The event: the gate is running, and it cannot pass until the test creates the hold file.
      const gate = await waitUntil(id, (s) => s.status.includes('health_gate') && (s.runnerPid ?? 0) > 0);
      const pid = gate.runnerPid as number;
      process.kill(pid, 'SIGKILL');
      while (alive(pid)) await sleep(20);
      writeFileSync(hold, '');
      const resumed = await runBinary(['topology', 'migration', 'resume', id, '-f', file]);
      expect(resumed.code, resumed.stderr).toBe(0);
      const final = await waitUntil(id, (s) => ['completed', 'failed', 'rolled_back'].includes(s.lifecycle));
      endedAt = Date.now();
      expect(final.lifecycle).toBe('completed');
    });
    expectNoFailures(run);
    expect(versionsAfter(run, endedAt)).toEqual(new Set(['2.0.0']));
    await expectOnlyLive('2.0.0', id);
  }, 90_000);
});
