import { readFileSync, readlinkSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { Component } from '../../../core/topology/types.js';
import { PortPool } from '../../../engine/drivers/port-pool.js';
import { createProcessDriver, readSlot, stopSlotProcesses } from '../../../engine/drivers/process-driver.js';
import { groupRunning } from '../../../engine/drivers/process-group.js';
import type { ReplicaRecord } from '../../../engine/drivers/process-slot.js';
import { replicaLaunch, startReplica } from '../../../engine/drivers/process-start.js';
import { slotLogPumps } from '../../../engine/drivers/process-strays.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from '../../../engine/drivers/types.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { isAlive, type ProcessIdentity } from '../../../platform/process-identity.js';
import { waitUntil } from '../../support/wait.js';

const serverJs = fileURLToPath(new URL('../../../examples/app/server.js', import.meta.url));
const node = process.execPath;
/** Ignores SIGTERM: only SIGKILL stops it. */
/** Ignores SIGTERM, and says so once its handler is in place (a SIGTERM before that kills it). */
const stubborn = [
  node,
  '-e',
  "process.on('SIGTERM',()=>{});console.log('trap set');setInterval(()=>{},1000)",
];
const idle = [node, '-e', 'setInterval(()=>{},1000)'];

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A temp base dir whose state dir is killed clean (every recorded replica) and removed after the test. */
async function workspace(): Promise<{ base: string; stateDir: string }> {
  const base = await mkdtemp(path.join(tmpdir(), 'cutover-process-'));
  const stateDir = path.join(base, '.cutover');
  cleanups.push(async () => {
    for (const replica of await recordedReplicas(stateDir)) await kill(replica);
    await rm(base, { recursive: true, force: true });
  });
  return { base, stateDir };
}

async function recordedReplicas(stateDir: string): Promise<ReplicaRecord[]> {
  const slots = path.join(stateDir, 'environments', 'test-env', 'slots');
  const ids = await readdir(slots).catch(() => []);
  const records = await Promise.all(ids.map((id) => readSlot(path.join(slots, id))));
  return records.flatMap((record) => record?.replicas ?? []);
}

/** SIGKILL to the process group, if it is still the one we started; waits until it is gone. */
async function kill(leader: ProcessIdentity): Promise<void> {
  if (!groupRunning(leader)) return;
  process.kill(-leader.pid, 'SIGKILL');
  await waitUntil(() => !groupRunning(leader), 5_000);
}

function spec(overrides: Partial<Component> = {}): Component {
  return {
    driver: 'apps',
    version: '2.1.0',
    run: { command: [node, serverJs] },
    env: { VERSION: '2.1.0' },
    replicas: 1,
    placement: { labels: {} },
    dependsOn: [],
    stateful: false,
    ...overrides,
  };
}

/** A component given a secret (its replicas' output goes through a log pump that masks it). */
const withSecret = { env: { VERSION: '2.1.0', API_TOKEN: { secret: 'API_TOKEN' } } };

function context(
  ws: { base: string; stateDir: string },
  component: Component,
  { migrationId = 'm1', stopTimeout = 5_000 } = {},
): ComponentCallContext {
  const secret = Object.values(component.env).some(
    (v) => typeof v === 'object' && v !== null && 'secret' in v,
  );
  return {
    ...(secret ? { env: { VERSION: component.version, API_TOKEN: 'token-0123456789' } } : {}),
    environment: 'test-env',
    migrationId,
    component: 'api',
    spec: component,
    driver: { type: 'process', stopTimeout },
    baseDir: ws.base,
    stateDir: StateDir.at(ws.stateDir),
  };
}

function callOptions(signal = new AbortController().signal): DriverCallOptions & { lines: string[] } {
  const lines: string[] = [];
  return { signal, log: (line) => lines.push(line), lines };
}

function replicasOf(slot: SlotInfo): ReplicaRecord[] {
  return slot.details?.replicas as ReplicaRecord[];
}

/** GET / of the demo app, retried while it is still binding its port. */
async function getVersion(address: string): Promise<{ version: string; pid: number }> {
  const until = Date.now() + 5_000;
  for (;;) {
    try {
      const response = await fetch(`http://${address}/`);
      return (await response.json()) as { version: string; pid: number };
    } catch (error) {
      if (Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/** Process group id of a process, from /proc/<pid>/stat. */
function pgidOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

/** Reads a replica's log until it holds `text`. */
async function logContaining(file: string, text: string): Promise<string> {
  let content = '';
  await waitUntil(() => {
    content = readFileSync(file, 'utf8');
    return content.includes(text);
  }, 5_000);
  return content;
}

describe('process driver', () => {
  const driver = createProcessDriver();

  it('provisions replicas on their own ports, detached, each answering with its version', async () => {
    const ws = await workspace();
    const options = callOptions();
    const slot = await driver.provision(context(ws, spec({ replicas: 2, ...withSecret })), 'green', options);

    const slotDir = path.join(ws.stateDir, 'environments', 'test-env', 'slots', 'api-m1');
    expect(slot).toMatchObject({
      component: 'api',
      slot: 'green',
      version: '2.1.0',
      details: { slotId: 'api-m1', slotDir },
    });
    expect(slot.addresses).toHaveLength(2);
    expect(new Set(slot.addresses).size).toBe(2);
    const replicas = replicasOf(slot);
    for (const [i, address] of slot.addresses.entries()) {
      const replica = replicas[i] as ReplicaRecord;
      expect(address).toBe(`127.0.0.1:${replica.port}`);
      expect(await getVersion(address)).toEqual({ version: '2.1.0', pid: replica.pid });
      // Detached: alive after the call, leading its own process group, writing to its log pump
      // (leading a group of its own, in the slot directory), which writes its log; not to us.
      expect(isAlive(replica)).toBe(true);
      expect(pgidOf(replica.pid)).toBe(replica.pid);
      expect(replica.log).toBe(path.join(slotDir, `replica-${i}.log`));
      const output = readlinkSync(`/proc/${replica.pid}/fd/1`);
      expect(output).toMatch(/^(socket|pipe):/);
      expect(readlinkSync(`/proc/${replica.pid}/fd/2`)).toBe(output);
      const pump = replica.pump as ProcessIdentity;
      expect(isAlive(pump)).toBe(true);
      expect(pgidOf(pump.pid)).toBe(pump.pid);
      expect(readlinkSync(`/proc/${pump.pid}/fd/1`)).toBe(replica.log);
      expect(readlinkSync(`/proc/${pump.pid}/cwd`)).toBe(slotDir);
      expect(await logContaining(replica.log, 'listening on')).toContain(`version=2.1.0`);
    }
    expect(options.lines).toEqual(
      replicas.map((r) => `started api replica ${r.index} (pid ${r.pid}) on 127.0.0.1:${r.port}`),
    );
    expect((await stat(path.join(slotDir, 'data'))).isDirectory()).toBe(true);
    expect(await readSlot(slotDir)).toMatchObject({ slotId: 'api-m1', slot: 'green', replicas });
  });

  it('starts no log pump for a replica given no secret: it writes its log itself', async () => {
    const ws = await workspace();
    const slot = await driver.provision(context(ws, spec()), 'green', callOptions());
    const [replica] = replicasOf(slot) as [ReplicaRecord];
    expect(replica.pump).toBeUndefined();
    expect(readlinkSync(`/proc/${replica.pid}/fd/1`)).toBe(replica.log);
    expect(readlinkSync(`/proc/${replica.pid}/fd/2`)).toBe(replica.log);
    expect(slotLogPumps(path.dirname(replica.log))).toEqual([]);
    expect(await logContaining(replica.log, 'listening on')).toContain('version=2.1.0');
  });

  it('gives each replica its environment, working directory and data directory', async () => {
    const ws = await workspace();
    await mkdir(path.join(ws.base, 'app'));
    const dump = [
      node,
      '-e',
      "for (const [k, v] of Object.entries(process.env).sort()) if (/^(CUTOVER_(?!TEST_RUN$)|PORT$|HOST$|LOG_LEVEL$)/.test(k)) console.log(k + '=' + v);" +
        "console.log('cwd=' + process.cwd()); setInterval(() => {}, 1000);",
    ];
    const component = spec({
      run: { command: dump, cwd: 'app' },
      env: { LOG_LEVEL: 'debug', PORT: '1' },
      replicas: 2,
    });
    const slot = await driver.provision(context(ws, component), 'green', callOptions());

    const slotDir = slot.details?.slotDir as string;
    for (const replica of replicasOf(slot)) {
      // A line of its own: the log's header names the command, which holds 'cwd=' too.
      const log = await logContaining(replica.log, '\ncwd=');
      // The test run's own knobs (CUTOVER_TEST_*) pass through like any variable: not the driver's.
      const lines = log
        .split('\n')
        .filter((line) => !line.startsWith('---') && line !== '' && !line.startsWith('CUTOVER_TEST_'));
      expect(lines).toEqual([
        `CUTOVER_COMPONENT=api`,
        `CUTOVER_DATA_DIR=${path.join(slotDir, 'data')}`,
        `CUTOVER_ENVIRONMENT=test-env`,
        `CUTOVER_REPLICA=${replica.index}`,
        `CUTOVER_SLOT=green`,
        `CUTOVER_SLOT_ID=api-m1`,
        `CUTOVER_VERSION=2.1.0`,
        `HOST=127.0.0.1`,
        `LOG_LEVEL=debug`,
        `PORT=${replica.port}`,
        `cwd=${path.join(ws.base, 'app')}`,
      ]);
    }
  });

  it('retires gracefully with SIGTERM, marks the slot retired, keeps the logs; retiring again succeeds', async () => {
    const ws = await workspace();
    const ctx = context(ws, spec({ replicas: 2 }));
    const slot = await driver.provision(ctx, 'green', callOptions());
    const replicas = replicasOf(slot);
    for (const address of slot.addresses) await getVersion(address);

    const options = callOptions();
    await driver.retire(ctx, slot, options);
    for (const replica of replicas) {
      expect(groupRunning(replica)).toBe(false);
      // Its last lines are in its log, written by its pump, which has ended.
      expect(await readFile(replica.log, 'utf8')).toContain('drained, exiting');
      expect(isAlive(replica.pump as ProcessIdentity)).toBe(false);
    }
    expect(slotLogPumps(slot.details?.slotDir as string)).toEqual([]);
    expect(options.lines.sort()).toEqual(
      replicas.map((r) => `stopped api replica ${r.index} (pid ${r.pid})`),
    );
    const record = await readSlot(slot.details?.slotDir as string);
    expect(record).toMatchObject({ retired: true });

    // Idempotent, and a slot known only by name (no details: a crash before provision answered) too.
    await driver.retire(ctx, slot, callOptions());
    await driver.retire(
      ctx,
      { component: 'api', slot: 'green', version: '2.1.0', addresses: [] },
      callOptions(),
    );
  });

  it('SIGKILLs a replica that ignores SIGTERM once stopTimeout has passed', async () => {
    const ws = await workspace();
    const ctx = context(ws, spec({ run: { command: stubborn } }), { stopTimeout: 500 });
    const slot = await driver.provision(ctx, 'green', callOptions());
    const [replica] = replicasOf(slot) as [ReplicaRecord];
    // On a loaded machine the replica may not have reached its handler when provision returns.
    await logContaining(replica.log, '\ntrap set');

    const options = callOptions();
    const started = Date.now();
    await driver.retire(ctx, slot, options);
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    expect(groupRunning(replica)).toBe(false);
    expect(options.lines).toEqual([`killed after 500ms api replica 0 (pid ${replica.pid})`]);
  });

  it('retires a slot it knows only from slot.json (no details), as `topology down` does', async () => {
    const ws = await workspace();
    const ctx = context(ws, spec({ run: { command: idle }, replicas: 2 }));
    const slot = await driver.provision(ctx, 'green', callOptions());
    await driver.retire(ctx, { ...slot, details: {} }, callOptions());
    for (const replica of replicasOf(slot)) expect(groupRunning(replica)).toBe(false);

    const again = await driver.provision(ctx, 'green', callOptions());
    const stopped = await stopSlotProcesses(again.details?.slotDir as string, { stopTimeoutMs: 1_000 });
    expect(stopped.map((s) => s.outcome)).toEqual(['stopped', 'stopped']);
    for (const replica of replicasOf(again)) expect(groupRunning(replica)).toBe(false);
  });

  it('provisioning the same slot again replaces the processes of the earlier attempt', async () => {
    const ws = await workspace();
    const ctx = context(ws, spec({ replicas: 2 }));
    const first = await driver.provision(ctx, 'green', callOptions());
    const options = callOptions();
    const second = await driver.provision(ctx, 'green', options);

    for (const replica of replicasOf(first)) expect(groupRunning(replica)).toBe(false);
    for (const [i, replica] of replicasOf(second).entries()) {
      expect(isAlive(replica)).toBe(true);
      expect(await getVersion(second.addresses[i] as string)).toMatchObject({ pid: replica.pid });
    }
    expect(options.lines[0]).toBe('stopping what an earlier attempt started in slot api-m1');
    expect(await readSlot(second.details?.slotDir as string)).toMatchObject({ replicas: replicasOf(second) });
    expect((await recordedReplicas(ws.stateDir)).map((r) => r.pid)).toEqual(
      replicasOf(second).map((r) => r.pid),
    );
  });

  // A runner SIGKILLed between starting a replica and recording it in slot.json (startReplicas
  // spawns, then writes) left that replica running with nothing to stop it: the next provision of
  // the slot (resume runs it again) and retire stopped only the recorded ones.
  for (const next of ['provision', 'retire'] as const) {
    it(`${next} stops a replica of the slot that slot.json does not record (its starter was killed)`, async () => {
      const ws = await workspace();
      const ctx = context(ws, spec({ replicas: 2, ...withSecret }));
      const first = await driver.provision(ctx, 'green', callOptions());
      const slotDir = first.details?.slotDir as string;
      // Replica 2 as the killed call started it: spawned the driver's way, never recorded.
      const [port] = await new PortPool().take(1);
      const launch = replicaLaunch(
        ctx,
        { slot: 'green', slotId: 'api-m1', slotDir, stopTimeoutMs: 5_000, startupGraceMs: 300 },
        { command: ctx.spec.run?.command as string[], cwd: ws.base, index: 2, port: port as number },
      );
      const stray = (await startReplica(launch, 'api')).record;
      cleanups.push(() => kill(stray));
      expect((await readSlot(slotDir))?.replicas.map((r) => r.pid)).not.toContain(stray.pid);
      expect(await getVersion(`127.0.0.1:${port}`)).toMatchObject({ pid: stray.pid });

      const options = callOptions();
      if (next === 'provision') await driver.provision(ctx, 'green', options);
      else await driver.retire(ctx, first, options);

      expect(groupRunning(stray)).toBe(false);
      // Its log pump, which slot.json did not record either, has ended with it.
      if (next === 'retire') expect(slotLogPumps(slotDir)).toEqual([]);
      else expect(slotLogPumps(slotDir)).toHaveLength(2); // the new replicas'
      expect(isAlive(stray.pump as ProcessIdentity)).toBe(false);
      expect(options.lines).toContain(
        `stopped api replica (pid ${stray.pid}), which slot.json did not record`,
      );
      for (const replica of replicasOf(first)) expect(groupRunning(replica)).toBe(false);
    });
  }

  it('fails permanently when a replica exits at once, quoting its log, and stops the others', async () => {
    const ws = await workspace();
    // A grace far longer than a loaded machine can take to run a shell: the call must notice
    // replica 0's exit when it happens, not by the grace running out (300 ms failed under CI load).
    const patient = createProcessDriver({ startupGraceMs: 60_000 });
    const crashFirst = [
      'sh',
      '-c',
      'if [ "$CUTOVER_REPLICA" = 0 ]; then echo booting; echo "bad config: DATABASE_URL missing" >&2; exit 3; fi; exec sleep 1000',
    ];
    const ctx = context(ws, spec({ run: { command: crashFirst }, replicas: 2 }));
    const error = await patient.provision(ctx, 'green', callOptions()).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentDriverError);
    const message = (error as Error).message;
    expect(message).toContain(
      `api replica 0 (${crashFirst.join(' ')}) exited with code 3 within 1m of starting`,
    );
    expect(message).toMatch(/last lines of .*replica-0\.log:\nbooting\nbad config: DATABASE_URL missing$/);
    const replicas = await recordedReplicas(ws.stateDir);
    expect(replicas).toHaveLength(2);
    for (const replica of replicas) expect(groupRunning(replica)).toBe(false);
  });

  it('fails permanently when the command cannot run', async () => {
    const ws = await workspace();
    const ctx = context(ws, spec({ run: { command: ['/nonexistent/app', '--serve'] } }));
    await expect(driver.provision(ctx, 'green', callOptions())).rejects.toThrow(
      /^cannot run \/nonexistent\/app --serve: program not found \(ENOENT\); install it, put it on the PATH, or give its full path$/,
    );
    const missingCwd = context(ws, spec({ run: { command: idle, cwd: 'nowhere' } }));
    await expect(driver.provision(missingCwd, 'green', callOptions())).rejects.toBeInstanceOf(
      PermanentDriverError,
    );
  });

  it('stops what it started when the call is aborted', async () => {
    const ws = await workspace();
    const controller = new AbortController();
    const options = callOptions(controller.signal);
    const log = options.log;
    // Abort as soon as the first replica is reported started, while the second starts or the call waits.
    options.log = (line) => {
      log(line);
      controller.abort(new Error('cancelled by operator'));
    };
    const ctx = context(ws, spec({ run: { command: idle }, replicas: 2 }));
    await expect(driver.provision(ctx, 'green', options)).rejects.toThrow('cancelled by operator');
    const replicas = await recordedReplicas(ws.stateDir);
    expect(replicas.length).toBeGreaterThan(0);
    for (const replica of replicas) expect(groupRunning(replica)).toBe(false);
  });

  it('drains at once', async () => {
    const ws = await workspace();
    const slot: SlotInfo = { component: 'api', slot: 'blue', version: '2.0.0', addresses: [] };
    await expect(driver.drain(context(ws, spec()), slot, 30_000, callOptions())).resolves.toBeUndefined();
  });
});

describe('process driver replicate', () => {
  const driver = createProcessDriver();

  /** Blue and green slots as provision reports them, with blue's data directory filled. */
  async function slots(ws: { stateDir: string }): Promise<{ blue: SlotInfo; green: SlotInfo }> {
    const dir = (id: string) => path.join(ws.stateDir, 'environments', 'test-env', 'slots', id);
    const info = (slot: 'blue' | 'green', slotId: string): SlotInfo => ({
      component: 'api',
      slot,
      version: slot === 'blue' ? '2.0.0' : '2.1.0',
      addresses: [],
      details: { slotId, slotDir: dir(slotId), replicas: [] },
    });
    await mkdir(path.join(dir('api-m0'), 'data', 'db', 'wal'), { recursive: true });
    await mkdir(path.join(dir('api-m1'), 'data'), { recursive: true });
    await writeFile(path.join(dir('api-m0'), 'data', 'db', 'main.db'), 'rows', { mode: 0o600 });
    await writeFile(path.join(dir('api-m0'), 'data', 'db', 'wal', '0001'), 'wal');
    await writeFile(path.join(dir('api-m0'), 'data', 'cache.bin'), 'cache');
    return { blue: info('blue', 'api-m0'), green: info('green', 'api-m1') };
  }

  function dataOf(slot: SlotInfo, ...parts: string[]): string {
    return path.join(slot.details?.slotDir as string, 'data', ...parts);
  }

  it('copies the named subdirectory of blue’s data directory into green’s, keeping modes', async () => {
    const ws = await workspace();
    const { blue, green } = await slots(ws);
    const ctx = context(
      ws,
      spec({ stateful: true, replicate: { maxLag: 1_000, timeout: 10_000, dataDir: 'db' } }),
    );
    await driver.replicate(ctx, blue, green, callOptions());

    expect(await readFile(dataOf(green, 'db', 'main.db'), 'utf8')).toBe('rows');
    expect((await stat(dataOf(green, 'db', 'main.db'))).mode & 0o777).toBe(0o600);
    expect(await readFile(dataOf(green, 'db', 'wal', '0001'), 'utf8')).toBe('wal');
    expect(await readdir(dataOf(green))).toEqual(['db']);
  });

  it("copies all of it with dataDir '.', and refuses a dataDir outside it", async () => {
    const ws = await workspace();
    const { blue, green } = await slots(ws);
    const replicate = { maxLag: 1_000, timeout: 10_000 };
    await driver.replicate(
      context(ws, spec({ replicate: { ...replicate, dataDir: '.' } })),
      blue,
      green,
      callOptions(),
    );
    expect((await readdir(dataOf(green))).sort()).toEqual(['cache.bin', 'db']);

    const outside = context(ws, spec({ replicate: { ...replicate, dataDir: '../..' } }));
    await expect(driver.replicate(outside, blue, green, callOptions())).rejects.toBeInstanceOf(
      PermanentDriverError,
    );
  });

  it('runs the replicate command with both data directories and slot ids', async () => {
    const ws = await workspace();
    const { blue, green } = await slots(ws);
    const copy = [
      node,
      '-e',
      "const fs = require('node:fs'); const e = process.env;" +
        "fs.copyFileSync(e.CUTOVER_FROM_DATA_DIR + '/db/main.db', e.CUTOVER_DATA_DIR + '/restored.db');" +
        "console.log(e.CUTOVER_FROM_SLOT_ID + ' -> ' + e.CUTOVER_SLOT_ID + ' in ' + process.cwd());",
    ];
    const ctx = context(ws, spec({ replicate: { maxLag: 1_000, timeout: 10_000, command: copy } }));
    const tracked: number[] = [];
    const untracked: number[] = [];
    const options = callOptions();
    options.trackProcess = (pid) => {
      tracked.push(pid);
      return () => untracked.push(pid);
    };
    await driver.replicate(ctx, blue, green, options);

    expect(tracked).toHaveLength(1);
    expect(untracked).toEqual(tracked);
    expect(await readFile(dataOf(green, 'restored.db'), 'utf8')).toBe('rows');
    expect(options.lines).toEqual([`[replicate api] api-m0 -> api-m1 in ${ws.base}`]);
  });

  it('fails permanently with the stderr tail, transiently on exit 75, and on its timeout', async () => {
    const ws = await workspace();
    const { blue, green } = await slots(ws);
    const withCommand = (command: string[], timeout = 10_000) =>
      context(ws, spec({ replicate: { maxLag: 1_000, timeout, command } }));

    const failing = [node, '-e', "console.error('pg_restore: connection refused'); process.exit(2)"];
    const error = await driver
      .replicate(withCommand(failing), blue, green, callOptions())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentDriverError);
    expect((error as Error).message).toMatch(
      /exited with code 2; last lines of stderr:\npg_restore: connection refused$/,
    );

    const busy = [node, '-e', "console.error('replica busy'); process.exit(75)"];
    const retry = await driver
      .replicate(withCommand(busy), blue, green, callOptions())
      .catch((e: unknown) => e);
    expect(retry).toBeInstanceOf(Error);
    expect(retry).not.toBeInstanceOf(PermanentDriverError);
    expect((retry as Error).message).toContain('EX_TEMPFAIL');

    const slow = await driver
      .replicate(withCommand(idle, 300), blue, green, callOptions())
      .catch((e: unknown) => e);
    expect(slow).not.toBeInstanceOf(PermanentDriverError);
    expect((slow as Error).message).toContain('timed out after 300ms');
  });

  it('copies nothing when neither a command nor a dataDir is set', async () => {
    const ws = await workspace();
    const { blue, green } = await slots(ws);
    const options = callOptions();
    await driver.replicate(context(ws, spec()), blue, green, options);
    expect(await readdir(dataOf(green))).toEqual([]);
    expect(options.lines).toEqual(['api: no replicate command or dataDir; nothing to copy']);
  });
});
