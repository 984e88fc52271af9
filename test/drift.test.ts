/**
 * Drift, end to end (issue 18, acceptance "Dead replicas" and items 2 and 4's --replace): things
 * changed behind cutover's back are seen by `plan` (exit 2 with --detailed-exitcode, the drift
 * named) and repaired by `migrate`. The real CLI (compiled dist/: `npm run build` first), real
 * replicas, the real router, real nginx, all on loopback.
 */
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readCurrentLayout } from '../engine/store/layout-store.js';
import { StateDir } from '../engine/store/state-dir.js';
import { liveRouterRecord } from '../router/router-record.js';
import { runCli } from './support/cli.js';
import { liveWorkspace, type Workspace, workspace } from './support/migrations.js';
import { runNginx } from './support/nginx.js';
import { waitGone } from './support/processes.js';
import { resourcesPerTest } from './support/resources.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const ws of spaces.splice(0)) await ws.cleanup();
});
const resources = resourcesPerTest();

type Live = Workspace & { url: string };

/** examples/live-demo migrated for real (all traffic at once, to keep the test short). */
async function liveDemo(edit: (yaml: string) => string = (y) => y): Promise<Live> {
  const w = await liveWorkspace((y) => edit(y.replace('shift: [10, 50, 100]', 'shift: [100]')));
  spaces.push(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stderr).toBe(0);
  return w;
}

async function livePids(w: Workspace, environment = 'live-demo'): Promise<number[]> {
  const layout = await readCurrentLayout(StateDir.at(w.stateDir), environment);
  return (layout.slots?.web?.details?.replicas as { pid: number }[]).map((r) => r.pid);
}

async function status(url: string): Promise<number> {
  try {
    return (await fetch(url, { headers: { connection: 'close' } })).status;
  } catch {
    return 0; // nothing answers
  }
}

const plan = (w: Workspace, ...extra: string[]) =>
  runCli(['topology', 'plan', '-f', w.file, '--detailed-exitcode', ...extra]);
const migrate = (w: Workspace, ...extra: string[]) =>
  runCli(['topology', 'migrate', '-f', w.file, '--yes', ...extra]);

describe('drift: seen by plan, repaired by migrate', () => {
  it('every replica of a live component killed behind its back: plan exits 2 naming it, migrate repairs, the route answers again', async () => {
    const w = await liveDemo();
    expect(await status(w.url)).toBe(200);
    const clean = await plan(w);
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);
    expect(clean.stdout).toContain('No changes.');

    const pids = await livePids(w);
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    for (const pid of pids) await waitGone(pid);
    expect(await status(w.url)).toBeGreaterThanOrEqual(500);

    const drifted = await plan(w);
    expect(drifted.code, drifted.stderr).toBe(2);
    expect(drifted.stdout).toContain('Changed outside of cutover:');
    expect(drifted.stdout).toContain('component web: 2 of 2 replicas not running');
    expect(drifted.stdout).toContain('-/+ component web will be replaced green-blue');
    const json = JSON.parse((await runCli(['topology', 'plan', '-f', w.file, '--json'])).stdout);
    expect(json.drift).toEqual([{ kind: 'component', name: 'web', reason: '2 of 2 replicas not running' }]);
    // The record alone still says nothing changed.
    const recordOnly = await plan(w, '--refresh=false');
    expect(recordOnly.code, recordOnly.stderr).toBe(0);

    const repaired = await migrate(w);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    expect(repaired.stdout).toMatch(/: completed$/m);
    expect(await status(w.url)).toBe(200);
    expect(await livePids(w)).not.toEqual(pids);
    expect((await plan(w)).code).toBe(0);
  });

  it('the router killed: plan shows the route not served, migrate brings it back', async () => {
    const w = await liveDemo();
    const router = liveRouterRecord(w.stateDir)?.pid as number;
    process.kill(router, 'SIGKILL');
    await waitGone(router);
    expect(await status(w.url)).toBe(0);

    const drifted = await plan(w);
    expect(drifted.code, drifted.stderr).toBe(2);
    expect(drifted.stdout).toContain('route www: route not served');
    expect(drifted.stdout).toMatch(/cutover:route:www\s+route not served/);
    const pids = await livePids(w);

    const repaired = await migrate(w);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    expect(await status(w.url)).toBe(200);
    // Only the route was re-applied: the replicas that served are the same processes.
    expect(await livePids(w)).toEqual(pids);
    expect((await plan(w)).code).toBe(0);
  });

  it('--replace: a green-blue replacement with no change; an unknown component is refused, naming the file', async () => {
    const w = await liveDemo();
    const pids = await livePids(w);
    const shown = await plan(w, '--replace', 'web');
    expect(shown.code).toBe(2);
    expect(shown.stdout).toContain('because: replacement requested');

    const replaced = await migrate(w, '--replace', 'web');
    expect(replaced.code, replaced.stdout + replaced.stderr).toBe(0);
    expect(replaced.stderr).toContain('replacement requested');
    expect(await status(w.url)).toBe(200);
    expect((await livePids(w)).some((pid) => pids.includes(pid))).toBe(false);

    const unknown = await migrate(w, '--replace', 'nope');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(`--replace nope: ${w.file} has no component nope (its components: web)`);
  });

  it('a pinned plan computed before drift appeared is refused as stale, saying what runs now', async () => {
    const w = await liveDemo();
    const pinned = JSON.parse((await runCli(['topology', 'plan', '-f', w.file, '--json'])).stdout).planId;
    const pids = await livePids(w);
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    for (const pid of pids) await waitGone(pid);
    const refused = await migrate(w, '--plan-id', pinned);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'did not see what runs now (component web: 2 of 2 replicas not running)',
    );
  });
});

describe('drift of other drivers', () => {
  it('nginx: an edited file is drift, and migrate writes it back and nginx serves it', async () => {
    const dir = await resources.tempDir('cutover-nginx-drift-');
    const routesConf = path.join(dir, 'routes.conf');
    writeFileSync(routesConf, '');
    const nginx = await runNginx(resources, { dir, workers: 1, errorLogLevel: 'notice' });
    const reload = JSON.stringify([...nginx.argv, '-s', 'reload']);
    const w = await liveDemo((y) =>
      y
        .replace(
          'drivers:\n',
          `drivers:\n  edge: { type: nginx, configFile: ${JSON.stringify(routesConf)}, reload: ${reload} }\n`,
        )
        .replace('    to: web\n', '    to: web\n    driver: edge\n'),
    );
    expect(await status(w.url)).toBe(200);
    expect((await plan(w)).code).toBe(0);

    writeFileSync(routesConf, `${readFileSync(routesConf, 'utf8')}\n# edited by hand\n`);
    const drifted = await plan(w);
    expect(drifted.code, drifted.stderr).toBe(2);
    expect(drifted.stdout).toContain('route www: nginx file edited');

    const repaired = await migrate(w);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    expect(readFileSync(routesConf, 'utf8')).not.toContain('edited by hand');
    expect(await status(w.url)).toBe(200);
    expect((await plan(w)).code).toBe(0);
  });

  it('exec: an observe script reporting a replica not running is drift; without one, nothing is', async () => {
    const w = await workspace('examples/exec-demo');
    spaces.push(w);
    expect((await migrate(w)).code).toBe(0);
    expect((await plan(w)).code).toBe(0);

    const infra = path.join(w.dir, 'infra');
    const observe = path.join(infra, 'observe');
    writeFileSync(
      observe,
      [
        '#!/bin/sh',
        '# Reports the one replica of api down, other components running.',
        'input=$(cat)',
        'case "$input" in',
        '  *\'"component":"api"\'*) echo \'{"replicas":[{"address":null,"state":"not_running","detail":"gone"}]}\' ;;',
        '  *) echo \'{"replicas":[{"address":null,"state":"running"}]}\' ;;',
        'esac',
        '',
      ].join('\n'),
    );
    chmodSync(observe, 0o755);
    const drifted = await plan(w);
    expect(drifted.code, drifted.stderr).toBe(2);
    expect(drifted.stdout).toContain('component api: 1 of 1 replica not running');
  });
});
