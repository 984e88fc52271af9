/**
 * The caddy driver through the real CLI (compiled dist/: `npm run build` first): the live demo
 * (examples/live-demo: two replicas of examples/app) with its route on a caddy driver, migrated for
 * real. The first migration starts the two Caddys in the state directory; every test migrates the
 * same workspace on, at 500 requests/s of keep-alive clients where the acceptance asks for it
 * (issue 33): a stepped shift judged by an analysis of Caddy's own counters, a rollback asked for
 * during a hold, drift made by hand through Caddy's admin API, and a Caddy killed mid-migration.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { caddyPaths, routeId, serverNames } from '../../engine/drivers/caddy-config.js';
import { adminCall, caddyPid } from '../../engine/drivers/caddy-process.js';
import { migrateUnderLoad as migrateCanaryUnderLoad } from '../support/canary.js';
import { runCli } from '../support/cli.js';
import { liveWorkspace } from '../support/migrations.js';
import { waitGone } from '../support/processes.js';
import { eventually } from '../support/wait.js';

const rate = 500;
let w: Awaited<ReturnType<typeof liveWorkspace>>;
let version = 1;

beforeAll(async () => {
  w = await liveWorkspace((y) =>
    y
      .replace('drivers:\n', 'drivers:\n  edge: { type: caddy }\n')
      .replace('    to: web\n', '    to: web\n    driver: edge\n')
      .replace(/shift: .*/, 'shift: [100]'),
  );
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stdout + first.stderr).toBe(0);
}, 60_000);

afterAll(async () => {
  // `down` (in cleanup) removes the route, and the driver stops both Caddys with the last one;
  // any left (a failed test) are killed by the pids they wrote, read before cleanup removes them.
  const paths = caddyPaths(w.stateDir);
  const pids = (['edge', 'split'] as const).map((instance) => caddyPid(paths, instance));
  await w.cleanup();
  for (const pid of pids) {
    if (pid === null) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone, as it should be
    }
  }
}, 60_000);

/** The next version, with the route's shift as the test wants it. */
function release(shift: string): string {
  version += 1;
  const text = readFileSync(w.file, 'utf8')
    .replace(/version: "[^"]*"/, `version: "${version}.0.0"`)
    .replace(/shift: .*/, `shift: ${shift}`);
  writeFileSync(w.file, text);
  return `${version}.0.0`;
}

function logOf(id: string): string {
  const environments = path.join(w.stateDir, 'environments');
  const [environment] = readdirSync(environments);
  const file = path.join(environments, environment as string, 'migrations', id, 'log.ndjson');
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
}

/** Runs `during` while a migration runs under load; the load's result and the migration's end. */
const migrateUnderLoad = (during?: (id: string) => Promise<void>) =>
  migrateCanaryUnderLoad(w, { rate }, during);

const plan = () => runCli(['topology', 'plan', '-f', w.file, '--detailed-exitcode']);

describe('caddy driver: migrations through the CLI', { timeout: 90_000 }, () => {
  it('a stepped shift with a hold judged on Caddy’s counters, at 500 requests/s: no request fails', async () => {
    const next = release(
      '[{ weight: 10, hold: 2s, analysis: { successRate: { min: 99 }, minRequests: 20 } }, { weight: 50, hold: 1s }, 100]',
    );
    const run = await migrateUnderLoad();
    console.log(
      `caddy stepped shift through the CLI: ${run.result.failed} of ${run.result.requests} requests failed`,
    );
    expect(run.end.lifecycle, run.end.reason ?? '').toBe('completed');
    expect(run.result.failures).toEqual([]);
    expect(run.result.versions[next]).toBeGreaterThan(0);
    const log = logOf(run.id);
    expect(log).toMatch(/route www: caddy: 90% blue, 10% green, live/);
    // The analysis read green's requests from Caddy's per-slot metrics.
    expect(log).toMatch(/analysis passed at the 10 % step/);
  });

  it('a rollback asked for during a hold, at 500 requests/s: no request fails, blue serves', async () => {
    const before = `${version}.0.0`;
    const live = readFileSync(w.file, 'utf8');
    release('[{ weight: 10, hold: 30s }, 100]');
    const run = await migrateUnderLoad(async (id) => {
      await eventually(() => /route www: caddy: 90% blue, 10% green, live/.test(logOf(id)), 30_000);
      const rollback = await runCli(['topology', 'migration', 'rollback', id, '-f', w.file]);
      expect(rollback.code, rollback.stdout + rollback.stderr).toBe(0);
    });
    console.log(
      `caddy rollback through the CLI: ${run.result.failed} of ${run.result.requests} requests failed`,
    );
    expect(run.end.lifecycle).toBe('rolled_back');
    expect(run.result.failures).toEqual([]);
    expect((await fetch(w.url).then((r) => r.json())) as { version: string }).toMatchObject({
      version: before,
    });
    // The file as what runs again, for the next tests' plans.
    writeFileSync(w.file, live);
  });

  it('an upstream removed and a weight edited through Caddy’s admin API are drift in plan and status; migrate repairs them', async () => {
    expect((await plan()).code).toBe(0);
    const paths = caddyPaths(w.stateDir);
    const names = serverNames(routeId('live-demo', 'www'));
    const split = JSON.parse((await adminCall(paths, 'split', 'GET', '/config/')).body) as {
      apps: {
        http: { servers: Record<string, { routes: { handle: { upstreams: { dial: string }[] }[] }[] }> };
      };
    };
    const blueServer = split.apps.http.servers[names.slot('blue')];
    const replicas = blueServer?.routes[0]?.handle[0]?.upstreams ?? [];
    expect(replicas).toHaveLength(2);

    // One replica out.
    const patch = (server: string, upstreams: unknown) =>
      adminCall(
        paths,
        'split',
        'PATCH',
        `/config/apps/http/servers/${server}/routes/0/handle/0/upstreams`,
        upstreams,
      );
    expect((await patch(names.slot('blue'), replicas.slice(0, 1))).status).toBe(200);
    const drifted = await plan();
    expect(drifted.code, drifted.stderr).toBe(2);
    expect(drifted.stdout).toContain('route www: caddy configuration edited');
    const status = await runCli(['topology', 'status', '-f', w.file]);
    expect(status.stdout).toContain('! route www: caddy configuration edited');
    expect(status.stdout).toMatch(
      /edited \(caddy \(split\) server \S+_blue is not the one cutover loaded \(upstreams 127\.0\.0\.1:\d+; cutover's: 127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+\)\)/,
    );
    expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
    expect((await plan()).code).toBe(0);

    // The weights: the main server's list (all blue) given a second entry.
    const mainUpstreams = split.apps.http.servers[names.main]?.routes[0]?.handle[0]?.upstreams ?? [];
    expect((await patch(names.main, [...mainUpstreams, ...mainUpstreams])).status).toBe(200);
    const reweighted = await plan();
    expect(reweighted.code).toBe(2);
    expect(reweighted.stdout).toContain('route www: caddy configuration edited');
    const repaired = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    expect((await plan()).code).toBe(0);
    const live = JSON.parse(
      (await adminCall(paths, 'split', 'GET', `/config/apps/http/servers/${names.main}`)).body,
    );
    expect(live.routes[0].handle[0].upstreams).toEqual(mainUpstreams);
  });

  it('the split Caddy killed during a hold, at 500 requests/s: the next step starts it again from what was applied, and the migration completes', async () => {
    const next = release('[{ weight: 10, hold: 2s }, 100]');
    const paths = caddyPaths(w.stateDir);
    let killed = 0;
    const run = await migrateUnderLoad(async (id) => {
      await eventually(() => /route www: caddy: 90% blue, 10% green, live/.test(logOf(id)), 30_000);
      killed = caddyPid(paths, 'split') as number;
      process.kill(killed, 'SIGKILL');
      await waitGone(killed);
    });
    console.log(
      `caddy split killed mid-migration: ${run.result.failed} of ${run.result.requests} requests failed`,
      JSON.stringify(run.result.failures.slice(0, 5)),
    );
    expect(run.end.lifecycle, run.end.reason ?? '').toBe('completed');
    // The clients' connections are the edge's, which lived on: what failed was answered (502:
    // a request the split held when it was killed, or one that waited longer than the edge's 5 s
    // for it to come back), never a reset connection.
    expect(run.result.failures.filter((f) => f.status !== 502)).toEqual([]);
    expect(logOf(run.id)).toMatch(/started caddy \(split\) for .* \(pid \d+\) from .*caddy\.json/);
    expect(caddyPid(paths, 'split')).not.toBe(killed);
    expect((await fetch(w.url).then((r) => r.json())) as { version: string }).toMatchObject({
      version: next,
    });
    expect((await plan()).code).toBe(0);
  });
});
