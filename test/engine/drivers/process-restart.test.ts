/**
 * The process driver's restart in place, with real processes: the dead replicas of the live slot
 * start again (on their recorded port if free, else a new one), the running ones are left alone,
 * and slot.json says what runs now.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { Component } from '../../../core/topology/types.js';
import { createProcessDriver, readSlot } from '../../../engine/drivers/process-driver.js';
import { groupRunning } from '../../../engine/drivers/process-group.js';
import type { ReplicaRecord } from '../../../engine/drivers/process-slot.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from '../../../engine/drivers/types.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import type { ProcessIdentity } from '../../../platform/process-identity.js';
import { waitUntil } from '../../support/wait.js';

const serverJs = fileURLToPath(new URL('../../../examples/app/server.js', import.meta.url));
const node = process.execPath;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function workspace(): Promise<{ base: string; stateDir: string }> {
  const base = await mkdtemp(path.join(tmpdir(), 'cutover-restart-'));
  const stateDir = path.join(base, '.cutover');
  cleanups.push(async () => {
    const slots = path.join(stateDir, 'environments', 'test-env', 'slots');
    for (const id of await readdir(slots).catch(() => [])) {
      for (const replica of (await readSlot(path.join(slots, id)))?.replicas ?? []) await kill(replica);
    }
    await rm(base, { recursive: true, force: true });
  });
  return { base, stateDir };
}

async function kill(leader: ProcessIdentity): Promise<void> {
  if (!groupRunning(leader)) return;
  process.kill(-leader.pid, 'SIGKILL');
  await waitUntil(() => !groupRunning(leader), 5_000);
}

function context(
  ws: { base: string; stateDir: string },
  overrides: Partial<Component> = {},
): ComponentCallContext {
  return {
    environment: 'test-env',
    migrationId: 'm1',
    component: 'worker',
    spec: {
      driver: 'apps',
      version: '1.0.0',
      run: { command: [node, serverJs] },
      env: { VERSION: '1.0.0' },
      replicas: 2,
      placement: { labels: {} },
      dependsOn: [],
      stateful: false,
      ...overrides,
    },
    driver: { type: 'process', stopTimeout: 5_000 },
    baseDir: ws.base,
    stateDir: StateDir.at(ws.stateDir),
  };
}

function callOptions(): DriverCallOptions & { lines: string[] } {
  const lines: string[] = [];
  return { signal: new AbortController().signal, log: (line) => lines.push(line), lines };
}

const replicasOf = (slot: SlotInfo) => slot.details?.replicas as ReplicaRecord[];

async function pidAt(address: string): Promise<number> {
  const until = Date.now() + 5_000;
  for (;;) {
    try {
      return ((await (await fetch(`http://${address}/`)).json()) as { pid: number }).pid;
    } catch (error) {
      if (Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/**
 * A live slot of two replicas, provisioned for real, as a migration committed it: each answers (a
 * replica still starting is not answering, and restart would replace it).
 */
async function liveSlot(ctx: ComponentCallContext): Promise<SlotInfo> {
  const slot = await createProcessDriver().provision(ctx, 'green', callOptions());
  for (const address of slot.addresses) await pidAt(address);
  return { ...slot, slot: 'blue' };
}

describe('process driver restart in place', () => {
  const driver = createProcessDriver();

  it('starts the dead replica again on its port and leaves the running one alone', async () => {
    const ctx = context(await workspace());
    const live = await liveSlot(ctx);
    const [dead, alive] = replicasOf(live) as [ReplicaRecord, ReplicaRecord];
    await kill(dead);

    const options = callOptions();
    const after = await (driver.restart as NonNullable<typeof driver.restart>)(ctx, live, options);

    expect(after.addresses).toEqual(live.addresses);
    const [restarted, kept] = replicasOf(after) as [ReplicaRecord, ReplicaRecord];
    expect(kept).toEqual(alive);
    expect(restarted.pid).not.toBe(dead.pid);
    expect(await pidAt(live.addresses[0] as string)).toBe(restarted.pid);
    expect(await pidAt(live.addresses[1] as string)).toBe(alive.pid);
    expect(options.lines).toEqual([
      `restarted worker replica 0 in place (pid ${restarted.pid}) on 127.0.0.1:${dead.port}`,
    ]);
    expect((await readSlot(after.details?.slotDir as string))?.replicas).toEqual([restarted, kept]);
  });

  it('moves a replica whose port another program took to a new port, and says so', async () => {
    const ctx = context(await workspace());
    const live = await liveSlot(ctx);
    const replicas = replicasOf(live);
    for (const replica of replicas) await kill(replica);
    const squatter = await squat((replicas[1] as ReplicaRecord).port);
    cleanups.push(() => new Promise((resolve) => squatter.close(() => resolve())));

    const options = callOptions();
    const after = await (driver.restart as NonNullable<typeof driver.restart>)(ctx, live, options);

    expect(after.addresses[0]).toBe(live.addresses[0]);
    expect(after.addresses[1]).not.toBe(live.addresses[1]);
    for (const [i, replica] of replicasOf(after).entries()) {
      expect(await pidAt(after.addresses[i] as string)).toBe(replica.pid);
    }
    expect(options.lines[1]).toContain(`(port ${(replicas[1] as ReplicaRecord).port} was taken)`);
  });

  it('fails permanently when a restarted replica exits at once, and leaves the running one alone', async () => {
    const ws = await workspace();
    const live = await liveSlot(context(ws));
    const [dead, alive] = replicasOf(live) as [ReplicaRecord, ReplicaRecord];
    await kill(dead);
    const broken = context(ws, {
      run: { command: [node, '-e', 'console.error("no config");process.exit(3)'] },
    });

    // A grace of a minute: the exit ends it as it happens, where node on a busy machine may take
    // longer than the default 300 ms to start and exit.
    const patient = createProcessDriver({ startupGraceMs: 60_000 });
    const restart = (patient.restart as NonNullable<typeof patient.restart>)(broken, live, callOptions());
    await expect(restart).rejects.toThrow(PermanentDriverError);
    await expect(restart).rejects.toThrow(/worker replica 0 .* exited with code 3 .*no config/s);
    expect(groupRunning(alive)).toBe(true);
    expect((await readSlot(live.details?.slotDir as string))?.replicas).toEqual([alive]);
  });
});

/**
 * Listens on `port` as "another program". The port the killed replica let go of can be taken for a
 * moment by another test's bind(0) on a busy machine (it failed so, unhandled EADDRINUSE, and hung):
 * try again until that holder lets go.
 */
async function squat(port: number): Promise<Server> {
  for (let attempt = 0; ; attempt++) {
    const server: Server = createServer();
    const error = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
      server.once('error', resolve);
      server.listen(port, '127.0.0.1', () => resolve(null));
    });
    if (error === null) return server;
    if (error.code !== 'EADDRINUSE' || attempt >= 100) throw error;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
