import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { observeEnvironment } from '../../../engine/api.js';
import { ensureRouter } from '../../../engine/drivers/router-driver.js';
import { readCurrentLayout } from '../../../engine/store/layout-store.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { liveRouterRecord } from '../../../router/router-record.js';
import { runCli, tempDir } from '../../support/cli.js';
import { killRunners, killSlots, liveWorkspace, type Workspace } from '../../support/migrations.js';
import { waitGone } from '../../support/processes.js';
import { eventually } from '../../support/wait.js';

const spaces: Workspace[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  for (const ws of spaces.splice(0)) await ws.cleanup();
});

/** examples/live-demo migrated for real: two `web` replicas behind the router on route `www`. */
async function liveDemo(): Promise<Workspace & { url: string; stateDir: string }> {
  const w = await liveWorkspace((y) => y.replace('shift: [10, 50, 100]', 'shift: [100]'));
  spaces.push(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stderr).toBe(0);
  return w;
}

async function replicaPids(stateDir: StateDir): Promise<number[]> {
  const layout = await readCurrentLayout(stateDir, 'live-demo');
  const replicas = layout.slots?.web?.details?.replicas as { pid: number }[];
  return replicas.map((r) => r.pid);
}

describe('observeLayout against real processes and the real router', () => {
  it('sees replicas running and the route served; then a replica killed behind its back, then the router gone', async () => {
    const w = await liveDemo();
    const stateDir = StateDir.at(w.stateDir);

    const live = await observeEnvironment(stateDir, 'live-demo');
    expect(live.components.web?.replicas.map((r) => r.state)).toEqual(['running', 'running']);
    expect(live.routes.www).toMatchObject({ state: 'served', greenPercent: 0, inFlight: 0 });
    expect(live.routes.www?.blue).toHaveLength(2);

    const [first] = await replicaPids(stateDir);
    process.kill(first as number, 'SIGKILL');
    await waitGone(first as number);
    const oneDead = await observeEnvironment(stateDir, 'live-demo');
    expect(oneDead.components.web?.replicas.map((r) => r.state)).toEqual(['not_running', 'running']);
    expect(oneDead.components.web?.replicas[0]).toMatchObject({ pid: first, detail: 'exited' });

    const router = liveRouterRecord(w.stateDir)?.pid as number;
    process.kill(router, 'SIGKILL');
    await waitGone(router);
    const noRouter = await observeEnvironment(stateDir, 'live-demo');
    expect(noRouter.routes.www).toMatchObject({ state: 'not_served' });
    expect(noRouter.routes.www?.detail).toContain('no router is running');
  });

  it('reports a route whose listen address another program holds as address_taken', async () => {
    const w = await liveDemo();
    const stateDir = StateDir.at(w.stateDir);
    const router = liveRouterRecord(w.stateDir)?.pid as number;
    process.kill(router, 'SIGKILL');
    await waitGone(router);
    // Another program takes the route's address while no router runs; a new router cannot open it.
    const { port } = new URL(w.url);
    const squatter = createServer();
    servers.push(squatter);
    await new Promise<void>((resolve) => squatter.listen(Number(port), '127.0.0.1', resolve));
    await ensureRouter(stateDir, () => {});

    // The new router tries the address a few times before it gives up on it.
    let observed = await observeEnvironment(stateDir, 'live-demo');
    await eventually(async () => {
      observed = await observeEnvironment(stateDir, 'live-demo');
      return observed.routes.www?.state !== 'not_served';
    }, 10_000);
    expect(observed.routes.www).toMatchObject({ state: 'address_taken' });
    expect(observed.routes.www?.detail).toContain('EADDRINUSE');
  });

  it('with no router running, a route whose address another program answers on is address_taken, not just unserved', async () => {
    const w = await liveDemo();
    const stateDir = StateDir.at(w.stateDir);
    const router = liveRouterRecord(w.stateDir)?.pid as number;
    process.kill(router, 'SIGKILL');
    await waitGone(router);
    const { port } = new URL(w.url);
    const squatter = createServer((socket) => socket.destroy());
    servers.push(squatter);
    await new Promise<void>((resolve) => squatter.listen(Number(port), '127.0.0.1', resolve));

    const observed = await observeEnvironment(stateDir, 'live-demo');
    expect(observed.routes.www).toMatchObject({ state: 'address_taken' });
    expect(observed.routes.www?.detail).toBe(
      `no router is running for ${w.stateDir}, and another program accepts connections on 127.0.0.1:${port}`,
    );
  });

  it("an exec component's observe script gets its references to dependencies, from the live slots", async () => {
    const { dir, cleanup } = await tempDir('cutover-observe-refs-');
    const file = path.join(dir, 'topology.yaml');
    spaces.push({
      dir,
      file,
      stateDir: path.join(dir, '.cutover'),
      cleanup: async () => {
        await runCli(['topology', 'down', '-f', file, '--yes']).catch(() => undefined);
        killSlots(path.join(dir, '.cutover'));
        killRunners(path.join(dir, '.cutover'));
        await cleanup();
      },
    });
    mkdirSync(path.join(dir, 'infra'));
    writeFileSync(
      path.join(dir, 'db.js'),
      "require('node:http').createServer((q, s) => s.end('ok')).listen(Number(process.env.PORT), '127.0.0.1');\n",
    );
    writeFileSync(
      path.join(dir, 'infra', 'observe'),
      '#!/bin/sh\nprintf \'{"replicas":[{"address":null,"state":"running","detail":"%s"}]}\' "$DB"\n',
      { mode: 0o755 },
    );
    writeFileSync(
      file,
      `apiVersion: cutover/v1
kind: Topology
metadata: { name: observe-refs }
drivers:
  apps: { type: process, stopTimeout: 2s }
  infra: { type: exec, dir: ./infra }
components:
  db:
    driver: apps
    version: "1"
    run: { command: [node, db.js] }
    health: { tcp: {}, interval: 100ms, deadline: 10s }
  reports:
    driver: infra
    version: "1"
    dependsOn: [db]
    env: { DB: { ref: db, format: "http://{address}/" } }
`,
    );
    const migrated = await runCli(['topology', 'migrate', '-f', file, '--yes']);
    expect(migrated.code, migrated.stderr).toBe(0);
    const layout = await readCurrentLayout(StateDir.at(path.join(dir, '.cutover')), 'observe-refs');
    const observed = await observeEnvironment(StateDir.at(path.join(dir, '.cutover')), 'observe-refs');
    expect(observed.components.reports?.replicas).toEqual([
      { address: null, state: 'running', detail: `http://${layout.slots?.db?.addresses[0]}/` },
    ]);
  });
});
