/**
 * A process replica's log pump (issue 26, item 7): what a replica prints reaches its log masked,
 * the pump holds no secret where others can read it, lives outside the replica's working directory
 * and process group, outlives the process that started it, has ended (with the replica's last
 * lines written) when stopping the replica returns, and its death never takes the replica with it.
 * Real replicas (sh, node), real pumps (dist/: run `npm run build` first).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { groupRunning, stopProcessGroup } from '../../../engine/drivers/process-group.js';
import { type ReplicaRecord, stopReplica, stopSlotProcesses } from '../../../engine/drivers/process-slot.js';
import { checkStartup, type ReplicaLaunch, startReplica } from '../../../engine/drivers/process-start.js';
import { slotLogPumps } from '../../../engine/drivers/process-strays.js';
import {
  isAlive,
  type ProcessIdentity,
  processIdentity,
  procStat,
} from '../../../platform/process-identity.js';
import { eventually } from '../../support/wait.js';

const node = process.execPath;
const root = fileURLToPath(new URL('../../../', import.meta.url));
const leaders: ProcessIdentity[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const leader of leaders.splice(0)) await stopProcessGroup(leader, 0).catch(() => undefined);
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

interface Setup {
  /** The slot directory (the log's). */
  dir: string;
  /** The replica's working directory. */
  appDir: string;
  password: string;
  launch: ReplicaLaunch;
}

/** A replica's launch in a fresh slot directory, with a password it is given as a secret. */
async function setup(command: string[]): Promise<Setup> {
  const base = await mkdtemp(path.join(tmpdir(), 'cutover-pump-'));
  dirs.push(base);
  const dir = path.join(base, 'slot');
  const appDir = path.join(base, 'app');
  await mkdir(path.join(dir, 'data'), { recursive: true });
  await mkdir(appDir);
  const password = `pw-${randomBytes(8).toString('hex')}`;
  const launch: ReplicaLaunch = {
    command,
    cwd: appDir,
    env: { PATH: process.env.PATH, DB_PASSWORD: password, CUTOVER_DATA_DIR: path.join(dir, 'data') },
    secretKeys: ['DB_PASSWORD'],
    log: path.join(dir, 'replica-0.log'),
    index: 0,
    port: 1,
  };
  return { dir, appDir, password, launch };
}

async function start(launch: ReplicaLaunch): Promise<ReplicaRecord> {
  const replica = await startReplica(launch, 'api');
  leaders.push(replica.record, ...(replica.record.pump ? [replica.record.pump] : []));
  await checkStartup('api', launch.command, [replica], 100, new AbortController().signal);
  return replica.record;
}

const logOf = (s: Setup) => readFileSync(s.launch.log, 'utf8');
const pgidOf = (pid: number) => Number(procStat(pid)?.[2]);

describe('the log pump of a process replica', () => {
  it('writes what the replica prints, stdout and stderr in order, its secrets masked; holds none where others read; runs in the slot directory, in a group of its own', async () => {
    const s = await setup([
      'sh',
      '-c',
      'echo "one $DB_PASSWORD"; echo "two $DB_PASSWORD" >&2; echo "url postgres://app:$DB_PASSWORD@db/x"; exec sleep 600',
    ]);
    const replica = await start(s.launch);
    await eventually(
      () => logOf(s).includes('\nurl '),
      10_000,
      () => logOf(s),
    );
    const lines = logOf(s).split('\n').slice(1); // after cutover's header
    expect(lines).toEqual(['one (sensitive)', 'two (sensitive)', 'url postgres://(sensitive)@db/x', '']);

    const pump = replica.pump as ProcessIdentity;
    expect(isAlive(pump)).toBe(true);
    expect(slotLogPumps(s.dir)).toEqual([pump]);
    for (const what of ['environ', 'cmdline']) {
      expect(readFileSync(`/proc/${pump.pid}/${what}`, 'utf8'), what).not.toContain(s.password);
    }
    expect(readFileSync(`/proc/${replica.pid}/environ`, 'utf8')).toContain(`DB_PASSWORD=${s.password}`);
    // The replica writes into the pump, the pump into the log; the pump is found where the slot is
    // (not among the app's processes), and a stop of the replica's group does not reach it.
    expect(readlinkSync(`/proc/${replica.pid}/fd/1`)).toMatch(/^(socket|pipe):/);
    expect(readlinkSync(`/proc/${replica.pid}/fd/2`)).toBe(readlinkSync(`/proc/${replica.pid}/fd/1`));
    expect(readlinkSync(`/proc/${pump.pid}/fd/1`)).toBe(s.launch.log);
    expect(readlinkSync(`/proc/${pump.pid}/cwd`)).toBe(s.dir);
    expect(readlinkSync(`/proc/${replica.pid}/cwd`)).toBe(s.appDir);
    expect(pgidOf(replica.pid)).toBe(replica.pid);
    expect(pgidOf(pump.pid)).toBe(pump.pid);
    // Nothing in the slot directory but the data and the log (no FIFO, nothing made later).
    expect(readdirSync(s.dir).sort()).toEqual(['data', 'replica-0.log']);
  }, 30_000);

  it('has written the lines the replica printed as it stopped, and ended, when stopping the replica returns', async () => {
    // The replica says (in a file, not through its log) when its SIGTERM handler is in place; the
    // stop comes then, while the pump (started beside it) may still be starting.
    const s = await setup([
      node,
      '-e',
      "process.on('SIGTERM', () => { console.log('bye ' + process.env.DB_PASSWORD); process.exit(0); }); console.log('up'); require('fs').writeFileSync(process.env.CUTOVER_DATA_DIR + '/ready', ''); setInterval(() => {}, 1000);",
    ]);
    const started = await startReplica(s.launch, 'api');
    const replica = started.record;
    const pump = replica.pump as ProcessIdentity;
    leaders.push(replica, pump);
    await eventually(() => existsSync(path.join(s.dir, 'data', 'ready')), 20_000);
    expect(await stopReplica(replica, 10_000)).toBe('stopped');
    expect(groupRunning(replica)).toBe(false);
    expect(isAlive(pump)).toBe(false);
    expect(slotLogPumps(s.dir)).toEqual([]);
    expect(logOf(s)).toContain('\nup\nbye (sensitive)\n');
    expect(logOf(s)).not.toContain(s.password);
  }, 30_000);

  it('a stop still returns, within its bound, when a process the replica started elsewhere keeps its output open: the pump is killed, and the stop says so', async () => {
    // The replica starts a child in a session of its own, without the replica's environment (a
    // stop of the slot misses it: neither in the replica's group nor found by CUTOVER_DATA_DIR),
    // that inherits its stdout and stderr, and says its pid in a file.
    const s = await setup([
      node,
      '-e',
      "const c = require('child_process').spawn('sleep', ['600'], { detached: true, env: { PATH: process.env.PATH }, stdio: ['ignore', 'inherit', 'inherit'] }); c.unref(); require('fs').writeFileSync(process.env.CUTOVER_DATA_DIR + '/child', String(c.pid)); setInterval(() => {}, 1000);",
    ]);
    const replica = await start(s.launch);
    const childFile = path.join(s.dir, 'data', 'child');
    await eventually(() => existsSync(childFile) && readFileSync(childFile, 'utf8') !== '', 20_000);
    const child = processIdentity(Number(readFileSync(childFile, 'utf8')));
    leaders.push(child);
    const pump = replica.pump as ProcessIdentity;
    const lines: string[] = [];
    const stopped = await stopSlotProcesses(s.dir, {
      replicas: [replica],
      stopTimeoutMs: 5_000,
      logPumpEndTimeoutMs: 500,
      log: (line) => lines.push(line),
    });
    expect(stopped.map((one) => one.outcome)).toEqual(['stopped']);
    expect(isAlive(pump)).toBe(false);
    expect(isAlive(child)).toBe(true); // not cutover's to stop: it left the replica's group
    expect(lines).toEqual([
      `stopped replica 0 (pid ${replica.pid})`,
      `killed the log pump (pid ${pump.pid}) of a stopped replica: its output was still open 500ms on (a process the replica started may hold it); its last lines may be missing from its log`,
    ]);
  }, 40_000);

  it('outlives the process that started it (SIGKILLed), masking what the replica prints later', async () => {
    const s = await setup([
      node,
      '-e',
      "setInterval(() => { if (require('fs').existsSync(process.env.CUTOVER_DATA_DIR + '/go')) { console.log('later ' + process.env.DB_PASSWORD); process.exit(0); } }, 20);",
    ]);
    // A runner of its own: it starts the replica (through dist/, as a runner does), says its
    // record, and waits to be killed.
    const starter = spawn(
      node,
      [
        '--input-type=module',
        '-e',
        `const { startReplica, checkStartup } = await import(${JSON.stringify(path.join(root, 'dist/engine/drivers/process-start.js'))});
const launch = JSON.parse(process.argv[1]);
const replica = await startReplica(launch, 'api');
await checkStartup('api', launch.command, [replica], 100, new AbortController().signal);
console.log(JSON.stringify(replica.record));
setInterval(() => {}, 1000);`,
        JSON.stringify(s.launch),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let said = '';
    starter.stdout.on('data', (data: Buffer) => {
      said += data.toString();
    });
    await eventually(
      () => said.includes('\n'),
      20_000,
      () => said,
    );
    const replica = JSON.parse(said) as ReplicaRecord;
    const pump = replica.pump as ProcessIdentity;
    leaders.push(replica, pump);
    const runner = processIdentity(starter.pid as number);
    starter.kill('SIGKILL');
    await eventually(() => !isAlive(runner), 10_000);

    await writeFile(path.join(s.dir, 'data', 'go'), '');
    // The replica exits; its pump writes its last line and ends with it.
    await eventually(() => !isAlive(pump), 10_000);
    expect(logOf(s)).toContain('\nlater (sensitive)\n');
    expect(logOf(s)).not.toContain(s.password);
  }, 40_000);

  it('killed on its own, costs the replica its log, never its life', async () => {
    // The replica prints a line and counts it, every 20 ms: with SIGPIPE's default action, its
    // first line after the only reader of its output died would kill it.
    const s = await setup([
      'sh',
      '-c',
      'i=0; while :; do i=$((i + 1)); echo "tick $i"; echo $i > "$CUTOVER_DATA_DIR/count"; sleep 0.02; done',
    ]);
    const replica = await start(s.launch);
    await eventually(
      () => logOf(s).includes('tick 2'),
      10_000,
      () => logOf(s),
    );
    const count = () => Number(readFileSync(path.join(s.dir, 'data', 'count'), 'utf8'));
    process.kill(replica.pump?.pid as number, 'SIGKILL');
    await eventually(() => !isAlive(replica.pump as ProcessIdentity), 10_000);
    const from = count();
    await eventually(() => count() >= from + 10 || !isAlive(replica), 20_000);
    expect(isAlive(replica)).toBe(true);
    expect(logOf(s)).not.toContain(s.password);
  }, 60_000);
});
