/**
 * Green dies during a timed hold, container driver (issue 26, item 1): the real router, 100
 * requests/s counted at the client, a real Podman. Both of green's containers are removed a second
 * into the 50 % hold of `[{ weight: 50, hold: 6s }, 100]`: the hold watches green's health, so the
 * migration rolls back at once (`rolled_back`), blue serves, and the failed requests are bounded by
 * green's share of the load until the watch sees it:
 *   rate × weight × (interval × failureThreshold + one interval for the probe round in flight
 *   + the rollback's route switch, 0.5 s)  =  100 × 0.5 × (0.2 × 3 + 0.2 + 0.5) = 65.
 * Before the fix the migration completed, blue was removed and the route answered 502 for good.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadResult } from '../../bench/load.js';
import { runCli } from '../support/cli.js';
import { startTestLoad } from '../support/load.js';
import {
  freePort,
  isFinal,
  killRunners,
  migrateDetached,
  type Workspace,
  waitFor,
} from '../support/migrations.js';
import { type PodmanFixture, podmanFixture } from '../support/podman.js';
import { eventually } from '../support/wait.js';

const rate = 100;
const weight = 50;
const intervalMs = 200;
const failureThreshold = 3;
const switchMs = 500;
const bound = Math.ceil(
  (rate * weight * (intervalMs * failureThreshold + intervalMs + switchMs)) / 100 / 1000,
);

let fx: PodmanFixture;
let dir: string;
let file: string;
let url: string;
const environment = () => `${fx.prefix}-gl`;
const ws = (): Workspace => ({ dir, file, stateDir: path.join(dir, '.cutover'), cleanup: async () => {} });

function write(version: string, tag: string, listen: string): void {
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
    version: "${version}"
    image: ${fx.image(tag)}
    pull: never
    replicas: 2
    ports: [{ container: 8080 }]
    env: { VERSION: "${version}" }
    health: { http: { path: /health }, interval: ${intervalMs}ms, successThreshold: 2, failureThreshold: ${failureThreshold}, deadline: 30s }
routes:
  public: { listen: "${listen}", to: web, shift: [{ weight: ${weight}, hold: 6s }, 100], drain: { timeout: 2s } }
`,
  );
}

let listen = '';
beforeAll(async () => {
  fx = await podmanFixture();
  await fx.build('1', 'one');
  await fx.build('2', 'two');
  dir = await mkdtemp(path.join(tmpdir(), 'cutover-container-gl-'));
  file = path.join(dir, 'topology.yaml');
  listen = `127.0.0.1:${await freePort()}`;
  url = `http://${listen}/`;
  write('1.0.0', '1', listen);
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

function logMessages(id: string): string[] {
  const log = path.join(dir, '.cutover', 'environments', environment(), 'migrations', id, 'log.ndjson');
  try {
    return readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => String((JSON.parse(l) as { message: string }).message));
  } catch {
    return [];
  }
}

describe('green dies during a timed hold (real podman)', () => {
  it(`both green containers removed at 100 requests/s: rolled back at once, blue serves, at most ${bound} requests failed`, async () => {
    write('2.0.0', '2', listen);
    const load = startTestLoad({ url, rate });
    let result: LoadResult;
    let end: Awaited<ReturnType<typeof waitFor>>;
    try {
      const id = await migrateDetached(ws());
      await eventually(() => logMessages(id).some((m) => /route public at 50% green/.test(m)), 60_000);
      await sleep(1_000);
      for (const replica of [0, 1]) {
        const removed = await fx.podman([
          'rm',
          '-f',
          '-t',
          '0',
          `cutover-${environment()}-web-${id}-${replica}`,
        ]);
        expect(removed.code, removed.stderr).toBe(0);
      }
      end = await waitFor(ws(), id, isFinal, 60_000);
      // Load goes on a second past the end: blue serves what comes after.
      await sleep(1_000);
    } finally {
      result = await load.stop();
    }
    console.log(
      `green lost in hold (container): ${result.failed} of ${result.requests} requests failed (bound ${bound})`,
    );
    expect(end.lifecycle).toBe('rolled_back');
    expect(end.reason).toMatch(
      /^green web lost its health during the hold: 127\.0\.0\.1:\d+ GET \/health → /,
    );
    expect(result.failed).toBeLessThanOrEqual(bound);
    const after = (await (await fetch(url)).json()) as { version: string };
    expect(after.version).toBe('1.0.0');
  }, 120_000);
});
