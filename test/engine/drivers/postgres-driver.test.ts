import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'vitest';
import { createCluster, readCluster } from '../../../engine/drivers/postgres-cluster.js';
import { postgresSettings, superuser } from '../../../engine/drivers/postgres-settings.js';
import { groupRunning, stopProcessGroup } from '../../../engine/drivers/process-group.js';
import { PermanentDriverError } from '../../../engine/drivers/types.js';
import { tcpProbe } from '../../../engine/health/probes.js';
import { stopLeftoverProcesses } from '../../../engine/runner/tracked-processes.js';
import { isAlive } from '../../../platform/process-identity.js';
import { eventually } from '../../support/wait.js';
import {
  callOptions,
  connect,
  pgContext,
  pgWorkspace,
  portOfSlot,
  provision,
  resourcesOf,
  sql,
} from './postgres-fixtures.js';

/** The compiled code a runner process runs (`npm run build` first). */
const repoRoot = path.resolve(import.meta.dirname, '../../..');

function leaderOf(details: Record<string, unknown> | undefined) {
  return { pid: details?.pid as number, startTime: (details?.startTime as string | null) ?? null };
}

// The cases run at once, each on a cluster of its own in a workspace of its own (resourcesOf).
describe('postgres driver slots (real PostgreSQL 15)', () => {
  it.concurrent('provisions a cluster run by the postgres user on a loopback port, observes it, and retires it without a trace', async (t) => {
    const { expect } = t;
    const resources = resourcesOf(t);
    const ws = await pgWorkspace(resources);
    const ctx = pgContext(ws, 'm1');
    const slot = await provision(ws, ctx, 'green');
    expect(slot.addresses).toEqual([`127.0.0.1:${slot.details?.port}`]);
    const leader = leaderOf(slot.details);
    // The server refuses root: it runs as the OS user Debian's package made.
    const status = await readFile(`/proc/${leader.pid}/status`, 'utf8');
    const uid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    expect(uid).not.toBe('0');
    // The application's role owns its database and the init file's table.
    expect(await sql(await connect(ctx, slot), 'SELECT current_user, current_database()')).toEqual([
      ['app', 'app'],
    ]);
    expect(
      await sql(await connect(ctx, slot), `SELECT tableowner FROM pg_tables WHERE tablename = 'items'`),
    ).toEqual([['app']]);
    const probe = await tcpProbe(slot.addresses[0] as string).run(2_000, AbortSignal.timeout(5_000));
    expect(probe?.ok).toBe(true);
    expect(await ws.driver.observe?.(ctx, slot, callOptions(ws))).toEqual([
      { address: slot.addresses[0], pid: leader.pid, state: 'running' },
    ]);

    await ws.driver.retire(ctx, slot, callOptions(ws));
    expect(groupRunning(leader)).toBe(false);
    expect(await ws.driver.observe?.(ctx, slot, callOptions(ws))).toEqual([
      { address: slot.addresses[0], pid: leader.pid, state: 'not_running', detail: 'exited' },
    ]);
    await ws.driver.retire(ctx, slot, callOptions(ws)); // again: nothing to do
    const logs = await ws.driver.logs?.(ctx, slot, 5, callOptions(ws));
    expect(logs?.[0]?.lines.join('\n')).toMatch(/shut down|shutting down/);
  }, 120_000);

  it.concurrent('tracks the server while provision runs, so a runner that dies meanwhile leaves none behind', async (t) => {
    const { expect } = t;
    const resources = resourcesOf(t);
    const ws = await pgWorkspace(resources);
    const ctx = pgContext(ws, 'm1');
    const tracked: { pid: number; released: boolean }[] = [];
    const trackProcess = (pid: number) => {
      const entry = { pid, released: false };
      tracked.push(entry);
      return () => {
        entry.released = true;
      };
    };
    const slot = await ws.driver.provision(ctx, 'green', { ...callOptions(ws), trackProcess });
    resources.add(() => ws.driver.retire(ctx, slot, callOptions(ws)));
    // Tracked from its start (the runner's tracker kills it if the runner dies), released once
    // recorded in the slot (cluster.json), which a provision again or a retire stops.
    expect(tracked).toEqual([{ pid: slot.details?.pid, released: true }]);
    expect((await readCluster(slot.details?.slotDir as string))?.pid).toBe(slot.details?.pid);
  }, 120_000);

  it.concurrent('a runner killed during provision leaves a tracked server, which the next runner stops', async (t) => {
    const { expect } = t;
    const resources = resourcesOf(t);
    const ws = await pgWorkspace(resources);
    const trackDir = path.join(ws.base, 'tracked');
    const dist = (file: string) => JSON.stringify(path.join(repoRoot, 'dist', file));
    const script = `
      import { createPostgresDriver } from ${dist('engine/drivers/postgres-driver.js')};
      import { StateDir } from ${dist('engine/store/state-dir.js')};
      import { processTracker } from ${dist('engine/runner/tracked-processes.js')};
      const [base, trackDir] = process.argv.slice(1);
      const ctx = { environment: 'test-env', migrationId: 'm1', component: 'db', baseDir: base,
        stateDir: StateDir.at(base + '/.cutover'),
        spec: { driver: 'pg', version: '1', env: {}, replicas: 1, placement: { labels: {} }, dependsOn: [], stateful: true },
        driver: { type: 'postgres', database: 'app', user: 'app', init: 'init.sql' } };
      await createPostgresDriver().provision(ctx, 'green', {
        signal: new AbortController().signal, log: (line) => console.log(line), trackProcess: processTracker(trackDir) });
      console.log('provisioned');`;
    const runner = spawn(process.execPath, ['--input-type=module', '-e', script, ws.base, trackDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    resources.add(() => {
      if (runner.exitCode === null && runner.signalCode === null) runner.kill('SIGKILL');
    });
    let out = '';
    runner.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    runner.stderr.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    await eventually(
      () => /started postgres \(pid \d+\)/.test(out),
      60_000,
      () => out,
    );
    runner.kill('SIGKILL');
    await once(runner, 'close');
    expect(out).not.toContain('provisioned');
    const pid = Number(/started postgres \(pid (\d+)\)/.exec(out)?.[1]);
    const record = await readCluster(ws.stateDir.slotDir('test-env', 'db-m1'));
    const leader = { pid, startTime: record?.startTime ?? null };
    resources.add(() => stopProcessGroup(leader, 1_000).then(() => undefined));
    expect(isAlive(leader)).toBe(true); // the killed runner left it running...

    expect(stopLeftoverProcesses(trackDir)).toEqual([pid]); // ...and the next runner stops it
    expect(groupRunning(leader)).toBe(false);
  }, 120_000);

  it.concurrent('a provision again stops the server an earlier attempt left in the slot', async (t) => {
    const { expect } = t;
    const resources = resourcesOf(t);
    const ws = await pgWorkspace(resources);
    const ctx = pgContext(ws, 'm1');
    const first = await provision(ws, ctx, 'green');
    const second = await provision(ws, ctx, 'green');
    expect(groupRunning(leaderOf(first.details))).toBe(false);
    expect(isAlive(leaderOf(second.details))).toBe(true);
  }, 120_000);

  it.concurrent('a port another PostgreSQL took before the new server listened fails the provision, and nothing is made in that cluster', async (t) => {
    const { expect } = t;
    const resources = resourcesOf(t);
    const ws = await pgWorkspace(resources);
    const taken = await provision(ws, pgContext(ws, 'm1'), 'green');
    // Another slot whose server is to listen on the same port (the port pool's choice, then another
    // process bound it first), with a role and database of its own.
    const ctx = pgContext(ws, 'm2', { user: 'intruder', database: 'intruder' });
    const settings = await postgresSettings(ctx);
    const slotDir = path.join(ws.base, 'other-slot');
    await mkdir(slotDir, { recursive: true });
    await expect(
      createCluster(settings, { slotId: 'other', slotDir, port: portOfSlot(taken) }, callOptions(ws)),
    ).rejects.toThrow(
      new RegExp(
        `port ${portOfSlot(taken)} was taken by another PostgreSQL \\(data directory .*\\) before this slot's server could listen there`,
      ),
    );
    // Before the fix the role, the database and the init file were made in the cluster that answered.
    const admin = { ...(await connect(ctx, taken, superuser)), database: 'postgres' };
    expect(await sql(admin, "SELECT count(*) FROM pg_roles WHERE rolname = 'intruder'")).toEqual([['0']]);
    expect(await sql(admin, "SELECT count(*) FROM pg_database WHERE datname = 'intruder'")).toEqual([['0']]);
    // The server it started exited (it could not listen) or was stopped: none is left running.
    const record = await readCluster(slotDir);
    expect(groupRunning({ pid: record?.pid as number, startTime: record?.startTime ?? null })).toBe(false);
  }, 120_000);

  it.concurrent('an init file that fails is a permanent error naming it, and leaves no server running', async (t) => {
    const { expect } = t;
    const resources = resourcesOf(t);
    const ws = await pgWorkspace(resources);
    await writeFile(path.join(ws.base, 'bad.sql'), 'CREATE TABLE broken (;\n');
    const ctx = pgContext(ws, 'm1', { init: 'bad.sql' });
    const attempt = ws.driver.provision(ctx, 'green', callOptions(ws));
    await expect(attempt).rejects.toThrow(PermanentDriverError);
    await expect(attempt).rejects.toThrow(/init file .*bad\.sql failed: .*syntax error at or near/);
    const record = await readCluster(ctx.stateDir.slotDir('test-env', 'db-m1'));
    expect(record).toBeDefined();
    expect(groupRunning({ pid: record?.pid as number, startTime: record?.startTime ?? null })).toBe(false);
  }, 120_000);

  it.concurrent('says in one line what to do when the server user, its programs or the state directory are missing', async (t) => {
    const { expect } = t;
    const resources = resourcesOf(t);
    const ws = await pgWorkspace(resources);
    const fail = (driver: Parameters<typeof pgContext>[2]) =>
      ws.driver.provision(pgContext(ws, 'm1', driver), 'green', callOptions(ws));
    await expect(fail({ runAs: 'no_such_user_here' })).rejects.toThrow(
      /^the OS user no_such_user_here that runs PostgreSQL does not exist: create it \(useradd --system no_such_user_here\)/,
    );
    await expect(fail({ runAs: 'root' })).rejects.toThrow(
      /^PostgreSQL refuses to run as root: set the postgres driver's `runAs`/,
    );
    await expect(fail({ bin: 'nowhere' })).rejects.toThrow(
      /^PostgreSQL's initdb is not in .*nowhere: install Debian's postgresql-15 \(apt-get install postgresql-15\)/,
    );
    await expect(fail({ init: 'missing.sql' })).rejects.toThrow(
      /^the postgres driver's init file .*missing\.sql cannot be read: it does not exist; fix `init` \(relative to the topology file\)$/,
    );
    await chmod(ws.base, 0o700);
    await expect(fail({})).rejects.toThrow(
      /^the OS user postgres, which runs PostgreSQL, cannot reach .*pgdata \(.*cutover-pg-\w+ is closed to other users\): open the state directory's parents to it \(chmod o\+x\)/,
    );
    for (const error of await Promise.allSettled([fail({ runAs: 'no_such_user_here' })])) {
      expect(error.status === 'rejected' && String(error.reason.message)).not.toContain('\n');
    }
  }, 60_000);
});
