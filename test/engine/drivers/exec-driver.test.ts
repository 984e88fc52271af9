import { readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../../core/topology/load-topology.js';
import type { Component, Health } from '../../../core/topology/types.js';
import { createExecDriver } from '../../../engine/drivers/exec-driver.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from '../../../engine/drivers/types.js';
import { waitHealthy } from '../../../engine/health/check-health.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { resourcesPerTest } from '../../support/resources.js';
import { waitUntil } from '../../support/wait.js';

const resources = resourcesPerTest();

/** A temp directory holding a topology's base dir with an `infra/` scripts dir. */
async function workspace(): Promise<{ base: string; infra: string }> {
  const base = await resources.tempDir('cutover-exec-');
  const infra = path.join(base, 'infra');
  await mkdir(infra);
  return { base, infra };
}

async function script(infra: string, stage: string, body: string, mode = 0o755): Promise<void> {
  await writeFile(path.join(infra, stage), `#!/bin/sh\nset -eu\n${body}\n`, { mode });
}

const dbSpec: Component = {
  driver: 'infra',
  version: '16',
  env: { DB_NAME: 'shop' },
  replicas: 1,
  placement: { labels: {} },
  dependsOn: [],
  stateful: true,
};

function context(base: string, timeout = 10_000): ComponentCallContext {
  return {
    environment: 'test-env',
    migrationId: 'm1',
    component: 'db',
    spec: dbSpec,
    driver: { type: 'exec', dir: './infra', timeout },
    baseDir: base,
    stateDir: StateDir.at(path.join(base, '.cutover')),
  };
}

function callOptions(signal = new AbortController().signal): DriverCallOptions & { lines: string[] } {
  const lines: string[] = [];
  return { signal, log: (line) => lines.push(line), lines };
}

const blue: SlotInfo = {
  component: 'db',
  slot: 'blue',
  version: '15',
  addresses: [],
  details: { slotId: 'db-m0' },
};
const green: SlotInfo = {
  component: 'db',
  slot: 'green',
  version: '16',
  addresses: [],
  details: { slotId: 'db-m1' },
};

/** Alive and not a zombie, as the kernel sees it. */
function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

function readPid(file: string): number | undefined {
  try {
    return Number(readFileSync(file, 'utf8').trim()) || undefined;
  } catch {
    return undefined;
  }
}

describe('exec driver', () => {
  const driver = createExecDriver();

  it('provisions: returns the addresses and details the script prints, with the slot id', async () => {
    const { base, infra } = await workspace();
    await script(infra, 'provision', `echo '{"addresses":["127.0.0.1:5432"],"details":{"pid":42}}'`);
    const slot = await driver.provision(context(base), 'green', callOptions());
    expect(slot).toEqual({
      component: 'db',
      slot: 'green',
      version: '16',
      addresses: ['127.0.0.1:5432'],
      details: { pid: 42, slotId: 'db-m1' },
    });
  });

  it('gives the script its context on stdin and in the environment, in the driver dir', async () => {
    const { base, infra } = await workspace();
    await script(
      infra,
      'provision',
      'cat > stdin.json\nenv | grep -E "^(CUTOVER_|DB_NAME=)" | grep -v "^CUTOVER_TEST_" | sort > env.txt\npwd > cwd.txt',
    );
    const slot = await driver.provision(context(base), 'green', callOptions());
    expect(slot.addresses).toEqual([]);
    const stdin = JSON.parse(await readFile(path.join(infra, 'stdin.json'), 'utf8'));
    expect(stdin).toEqual({
      environment: 'test-env',
      migrationId: 'm1',
      component: 'db',
      stage: 'provision',
      slot: 'green',
      slotId: 'db-m1',
      version: '16',
      spec: dbSpec,
      timeoutMs: 10_000,
    });
    // The test run's own knobs (CUTOVER_TEST_*) pass through like any variable of cutover's: not ours.
    const written = (await readFile(path.join(infra, 'env.txt'), 'utf8')).trim().split('\n');
    expect(written.filter((line) => !line.startsWith('CUTOVER_TEST_'))).toEqual([
      'CUTOVER_COMPONENT=db',
      'CUTOVER_ENVIRONMENT=test-env',
      'CUTOVER_MIGRATION_ID=m1',
      'CUTOVER_SLOT=green',
      'CUTOVER_SLOT_ID=db-m1',
      'CUTOVER_STAGE=provision',
      `CUTOVER_STATE_DIR=${path.join(base, '.cutover')}`,
      'CUTOVER_TIMEOUT_MS=10000',
      'CUTOVER_VERSION=16',
      'DB_NAME=shop',
    ]);
    expect((await readFile(path.join(infra, 'cwd.txt'), 'utf8')).trim()).toBe(infra);
  });

  it('gives a component its dependencies: their slots on stdin, its references in the environment', async () => {
    const { base, infra } = await workspace();
    await script(infra, 'provision', 'cat > stdin.json\necho "$DATABASE_URL|$QUEUES" > refs.txt');
    const spec: Component = {
      ...dbSpec,
      dependsOn: ['pg', 'queue'],
      env: {
        DATABASE_URL: { ref: 'pg', format: 'postgres://app@{host}:{port}/app' },
        QUEUES: { ref: 'queue', format: '{addresses}' },
      },
    };
    const dependencies = {
      pg: { slot: 'green' as const, addresses: ['127.0.0.1:6543'] },
      queue: { slot: 'blue' as const, addresses: ['127.0.0.1:7001', '127.0.0.1:7002'] },
    };
    await driver.provision({ ...context(base), spec, dependencies }, 'green', callOptions());
    const stdin = JSON.parse(await readFile(path.join(infra, 'stdin.json'), 'utf8'));
    expect(stdin.dependencies).toEqual(dependencies);
    expect((await readFile(path.join(infra, 'refs.txt'), 'utf8')).trim()).toBe(
      'postgres://app@127.0.0.1:6543/app|127.0.0.1:7001,127.0.0.1:7002',
    );
    // A reference whose dependency has no slot given is refused for good, naming it.
    const without = driver.provision(
      { ...context(base), spec, dependencies: { pg: dependencies.pg } },
      'green',
      callOptions(),
    );
    await expect(without).rejects.toThrow(PermanentDriverError);
    await expect(without).rejects.toThrow(
      'env.QUEUES of component db refers to queue, which has no slot recorded',
    );
  });

  it('replicates from one slot id into another, with both slots on stdin', async () => {
    const { base, infra } = await workspace();
    await script(
      infra,
      'replicate',
      'cat > stdin.json\necho "$CUTOVER_FROM_SLOT_ID -> $CUTOVER_SLOT_ID" > copy.txt',
    );
    await driver.replicate(context(base), blue, green, callOptions());
    expect(await readFile(path.join(infra, 'copy.txt'), 'utf8')).toBe('db-m0 -> db-m1\n');
    const stdin = JSON.parse(await readFile(path.join(infra, 'stdin.json'), 'utf8'));
    expect(stdin).toMatchObject({
      stage: 'replicate',
      slot: 'green',
      slotId: 'db-m1',
      from: blue,
      to: green,
    });
  });

  it('drains by waiting for the script, telling it the drain timeout', async () => {
    const { base, infra } = await workspace();
    await script(
      infra,
      'drain',
      'sleep 0.3\necho "$CUTOVER_SLOT_ID $CUTOVER_DRAIN_TIMEOUT_MS" > drained.txt',
    );
    const started = Date.now();
    await driver.drain(context(base), blue, 30_000, callOptions());
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(await readFile(path.join(infra, 'drained.txt'), 'utf8')).toBe('db-m0 30000\n');
  });

  it('skips a stage without a script', async () => {
    const { base, infra } = await workspace();
    const options = callOptions();
    await driver.drain(context(base), blue, 30_000, options);
    await driver.retire(context(base), blue, options);
    const slot = await driver.provision(context(base), 'green', options);
    expect(slot.details).toEqual({ slotId: 'db-m1' });
    expect(options.lines).toEqual([
      `no drain script in ${infra}; skipped`,
      `no retire script in ${infra}; skipped`,
      `no provision script in ${infra}; skipped`,
    ]);
  });

  it('refuses a missing driver directory and a script that is not executable', async () => {
    const { base, infra } = await workspace();
    const missing = { ...context(base), driver: { type: 'exec', dir: './nope', timeout: 1000 } } as const;
    await expect(driver.retire(missing, blue, callOptions())).rejects.toThrow(PermanentDriverError);
    await script(infra, 'retire', 'exit 0', 0o644);
    const file = path.join(infra, 'retire');
    await expect(driver.retire(context(base), blue, callOptions())).rejects.toThrow(
      new PermanentDriverError(`${file} is not executable: run chmod +x ${file}`),
    );
  });

  it('logs stderr lines as they arrive, prefixed with stage and component', async () => {
    const { base, infra } = await workspace();
    await script(infra, 'retire', 'echo "removing db-m0" >&2\nsleep 0.5\nprintf "done" >&2');
    const seen: { line: string; at: number }[] = [];
    const options = {
      signal: new AbortController().signal,
      log: (line: string) => seen.push({ line, at: Date.now() }),
    };
    await driver.retire(context(base), blue, options);
    const finishedAt = Date.now();
    expect(seen.map((s) => s.line)).toEqual(['[retire db] removing db-m0', '[retire db] done']);
    expect(finishedAt - (seen[0]?.at ?? finishedAt)).toBeGreaterThanOrEqual(400);
  });

  it('treats exit 75 as retryable and any other failure as permanent, quoting the last 10 stderr lines', async () => {
    const { base, infra } = await workspace();
    const twelveLines = 'for i in 01 02 03 04 05 06 07 08 09 10 11 12; do echo "line $i" >&2; done';
    await script(infra, 'provision', `${twelveLines}\nexit 75`);
    const retryable = await driver.provision(context(base), 'green', callOptions()).catch((e: unknown) => e);
    expect(retryable).toBeInstanceOf(Error);
    expect(retryable).not.toBeInstanceOf(PermanentDriverError);
    expect((retryable as Error).message).toContain('exited with code 75');

    await script(infra, 'provision', `${twelveLines}\nexit 1`);
    const permanent = await driver.provision(context(base), 'green', callOptions()).catch((e: unknown) => e);
    expect(permanent).toBeInstanceOf(PermanentDriverError);
    const message = (permanent as Error).message;
    expect(message.split('\n')[0]).toBe('provision script exited with code 1; last lines of stderr:');
    expect(message).toContain('line 03\nline 04');
    expect(message).toContain('line 12');
    expect(message).not.toContain('line 02');
  });

  it('refuses stdout that is not a JSON object, quoting its first 200 characters', async () => {
    const { base, infra } = await workspace();
    await script(infra, 'provision', `echo "Creating db... ${'x'.repeat(300)}"`);
    const error = await driver.provision(context(base), 'green', callOptions()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentDriverError);
    const quoted = (error as Error).message.split('it printed: ')[1] as string;
    expect(quoted).toHaveLength(200);
    expect(quoted.startsWith('Creating db... xxx')).toBe(true);
  });

  it('on timeout kills the whole process group and fails retryably', async () => {
    const { base, infra } = await workspace();
    await script(infra, 'provision', 'sleep 60 &\necho $! > bg.pid\nsleep 60');
    const started = Date.now();
    const error = await driver.provision(context(base, 500), 'green', callOptions()).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(PermanentDriverError);
    expect((error as Error).message).toBe('provision script timed out after 500ms');
    const pid = readPid(path.join(infra, 'bg.pid')) as number;
    expect(pid).toBeGreaterThan(0);
    expect(await waitUntil(() => !isAlive(pid), 1000)).toBe(true);
  });

  it('sends SIGKILL 2 s after SIGTERM to a script that ignores SIGTERM', async () => {
    const { base, infra } = await workspace();
    await script(infra, 'retire', `trap '' TERM\necho $$ > self.pid\nwhile :; do sleep 0.1; done`);
    const started = Date.now();
    await expect(driver.retire(context(base, 300), blue, callOptions())).rejects.toThrow(
      'timed out after 300ms',
    );
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(2200);
    expect(elapsed).toBeLessThan(4000);
    expect(isAlive(readPid(path.join(infra, 'self.pid')) as number)).toBe(false);
  });

  it('rejects with an AbortError when aborted, after killing the process group', async () => {
    const { base, infra } = await workspace();
    await script(infra, 'drain', 'sleep 60 &\necho $! > bg.pid\nwait');
    const controller = new AbortController();
    const pending = driver
      .drain(context(base), blue, 30_000, callOptions(controller.signal))
      .catch((e: unknown) => e);
    expect(await waitUntil(() => readPid(path.join(infra, 'bg.pid')) !== undefined, 5000)).toBe(true);
    const pid = readPid(path.join(infra, 'bg.pid')) as number;
    const started = Date.now();
    controller.abort();
    const error = await pending;
    expect((error as Error).name).toBe('AbortError');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(await waitUntil(() => !isAlive(pid), 1000)).toBe(true);
  });
});

describe('examples/exec-demo', () => {
  const exampleDir = path.resolve('examples/exec-demo');

  async function exampleTopology() {
    const file = path.join(exampleDir, 'topology.yaml');
    const result = loadTopology(await readFile(file, 'utf8'), { file });
    if (!result.ok) throw new Error(JSON.stringify(result.diagnostics));
    return result.topology;
  }

  it('runs two migrations of db and api through its scripts and health command', async () => {
    const topology = await exampleTopology();
    const stateDir = await resources.tempDir('cutover-exec-demo-');
    const driver = createExecDriver();
    const ctx = (component: string, migrationId: string): ComponentCallContext => ({
      environment: topology.metadata.name,
      migrationId,
      component,
      spec: topology.components[component] as Component,
      driver: topology.drivers.infra as ComponentCallContext['driver'],
      baseDir: exampleDir,
      stateDir: StateDir.at(stateDir),
    });
    const options = callOptions();
    // The runner gives the health command the component's env, the green slot id and the state dir.
    const apiHealth = (slotId: string, env: Record<string, string> = {}) =>
      waitHealthy({
        // The example's probe, faster: three failures take 150 ms instead of 1.5 s.
        health: { ...(topology.components.api?.health as Health), interval: 50 },
        addresses: [],
        env: { CUTOVER_STATE_DIR: stateDir, CUTOVER_SLOT_ID: slotId, ...env },
        cwd: exampleDir,
        deadlineMs: 5000,
        signal: new AbortController().signal,
        log: options.log,
      });
    const root = path.join(stateDir, 'exec-demo');

    // First migration: everything is new.
    const db1 = await driver.provision(ctx('db', 'm1'), 'green', options);
    expect(db1.details).toEqual({ marker: 'exec-demo/db-m1/ready', slotId: 'db-m1' });
    const api1 = await driver.provision(ctx('api', 'm1'), 'green', options);
    await apiHealth('api-m1');
    await expect(apiHealth('api-m1', { DEMO_UNHEALTHY: '1' })).rejects.toThrow(
      'command ./infra/check-health → exit 1: DEMO_UNHEALTHY is set: reporting unhealthy (3 failures in a row)',
    );

    // Second migration: db's data moves into the new slot, the old slots drain and go.
    const db2 = await driver.provision(ctx('db', 'm2'), 'green', options);
    await driver.replicate(ctx('db', 'm2'), { ...db1, slot: 'blue' }, db2, options);
    expect((await readdir(path.join(root, 'db-m2', 'data'))).sort()).toEqual([
      'created-by-db-m1',
      'created-by-db-m2',
    ]);
    await driver.drain(ctx('db', 'm2'), { ...db1, slot: 'blue' }, 0, options);
    await driver.retire(ctx('db', 'm2'), { ...db1, slot: 'blue' }, options);
    await driver.retire(ctx('api', 'm2'), { ...api1, slot: 'blue' }, options);
    await driver.retire(ctx('api', 'm2'), { ...api1, slot: 'blue' }, options);
    expect(await readdir(root)).toEqual(['db-m2']);
    await expect(apiHealth('api-m1')).rejects.toThrow(
      'command ./infra/check-health → exit 1: api-m1 is not ready',
    );
    expect(options.lines).toContain('[provision db] creating db 1 as db-m1');
  });
});
