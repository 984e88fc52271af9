/**
 * A process replica's log pump (issue 26, item 7): what a replica prints reaches its log masked,
 * the pump holds no secret where others can read it, outlives the process that started it, is
 * stopped with its replica, and its death never takes the replica with it. Real replicas (sh,
 * node), real pumps (dist/: run `npm run build` first).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { stopProcessGroup } from '../../../engine/drivers/process-group.js';
import { checkStartup, type ReplicaLaunch, startReplica } from '../../../engine/drivers/process-start.js';
import { isAlive, type ProcessIdentity, processIdentity } from '../../../platform/process-identity.js';
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
  dir: string;
  password: string;
  launch: ReplicaLaunch;
}

/** A replica's launch in a fresh slot directory, with a password it is given as a secret. */
async function setup(command: string[]): Promise<Setup> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cutover-pump-'));
  dirs.push(dir);
  await mkdir(path.join(dir, 'data'));
  const password = `pw-${randomBytes(8).toString('hex')}`;
  const launch: ReplicaLaunch = {
    command,
    cwd: dir,
    env: { PATH: process.env.PATH, DB_PASSWORD: password, CUTOVER_DATA_DIR: path.join(dir, 'data') },
    secretKeys: ['DB_PASSWORD'],
    log: path.join(dir, 'replica-0.log'),
    index: 0,
    port: 1,
  };
  return { dir, password, launch };
}

async function start(launch: ReplicaLaunch): Promise<ProcessIdentity> {
  const replica = await startReplica(launch, 'api');
  leaders.push(replica.record);
  await checkStartup('api', launch.command, [replica], 100, new AbortController().signal);
  return replica.record;
}

/** The live processes of the process group `pgid` other than its leader: the log pump and its keeper. */
function othersInGroup(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== pgid)
    .filter((entry) => {
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return Number(pgrp) === pgid && state !== 'Z' && state !== 'X';
      } catch {
        return false; // exited while we looked
      }
    })
    .map(Number);
}

const logOf = (s: Setup) => readFileSync(s.launch.log, 'utf8');

/** The log pump of the replica leading `pgid` (its keeper is the other process of the group). */
function pumpOf(pgid: number): number {
  const [pump, ...more] = othersInGroup(pgid).filter(
    (pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === node,
  );
  expect(more).toEqual([]);
  return pump as number;
}

describe('the log pump of a process replica', () => {
  it('writes what the replica prints, stdout and stderr in order, its secrets masked; holds none where others read', async () => {
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

    const others = othersInGroup(replica.pid);
    expect(others).toHaveLength(2); // the pump and its keeper
    expect(others).toContain(pumpOf(replica.pid));
    for (const other of others) {
      for (const what of ['environ', 'cmdline']) {
        expect(readFileSync(`/proc/${other}/${what}`, 'utf8'), what).not.toContain(s.password);
      }
    }
    expect(readFileSync(`/proc/${replica.pid}/environ`, 'utf8')).toContain(`DB_PASSWORD=${s.password}`);
    // The FIFO between them is gone from the slot directory once both ends are open.
    expect(readdirSync(s.dir).sort()).toEqual(['data', 'replica-0.log']);
  }, 30_000);

  it('is stopped with its replica, after writing the lines the replica printed as it stopped, even while still starting', async () => {
    // The replica says (in a file, not through its log) when its SIGTERM handler is in place; the
    // stop comes then, while the pump (started beside it, at a lower priority) may still be starting.
    const s = await setup([
      node,
      '-e',
      "process.on('SIGTERM', () => { console.log('bye ' + process.env.DB_PASSWORD); process.exit(0); }); console.log('up'); require('fs').writeFileSync(process.env.CUTOVER_DATA_DIR + '/ready', ''); setInterval(() => {}, 1000);",
    ]);
    const replica = (await startReplica(s.launch, 'api')).record;
    leaders.push(replica);
    await eventually(() => existsSync(path.join(s.dir, 'data', 'ready')), 20_000);
    expect(await stopProcessGroup(replica, 10_000)).toBe('stopped');
    expect(othersInGroup(replica.pid)).toEqual([]);
    expect(logOf(s)).toContain('\nup\nbye (sensitive)\n');
    expect(logOf(s)).not.toContain(s.password);
  }, 30_000);

  it('outlives the process that started it (SIGKILLed), masking what the replica prints later', async () => {
    const s = await setup([
      node,
      '-e',
      "setInterval(() => { if (require('fs').existsSync(process.env.CUTOVER_DATA_DIR + '/go')) { console.log('later ' + process.env.DB_PASSWORD); process.exit(0); } }, 20);",
    ]);
    // A runner of its own: it starts the replica (through dist/, as a runner does), says its pid,
    // and waits to be killed.
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
    const replica = JSON.parse(said) as ProcessIdentity;
    leaders.push(replica);
    const runner = processIdentity(starter.pid as number);
    starter.kill('SIGKILL');
    await eventually(() => !isAlive(runner), 10_000);

    await writeFile(path.join(s.dir, 'data', 'go'), '');
    await eventually(
      () => logOf(s).includes('\nlater'),
      10_000,
      () => logOf(s),
    );
    expect(logOf(s)).toContain('\nlater (sensitive)\n');
    expect(logOf(s)).not.toContain(s.password);
  }, 40_000);

  it('killed on its own, is started again by its keeper; both killed, they cost the replica its log, never its life', async () => {
    // The replica prints a line and counts it, every 20 ms: with SIGPIPE's default action, its
    // first line after the last reader of its output died would kill it.
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
    const goesOn = async () => {
      const from = count();
      await eventually(() => count() >= from + 10 || !isAlive(replica), 20_000);
      expect(isAlive(replica)).toBe(true);
    };

    const pump = pumpOf(replica.pid);
    process.kill(pump, 'SIGKILL');
    // It had taken the values to mask: the one started again says it writes nothing from now on.
    await eventually(
      () => logOf(s).includes('started again'),
      20_000,
      () => logOf(s),
    );
    expect(pumpOf(replica.pid)).not.toBe(pump);
    await goesOn();

    const keeper = othersInGroup(replica.pid).find(
      (pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[3] === 'cutover-log-pump',
    ) as number;
    const logWriters = [keeper, pumpOf(replica.pid)];
    for (const pid of logWriters) process.kill(pid, 'SIGKILL');
    await eventually(() => logWriters.every((pid) => !othersInGroup(replica.pid).includes(pid)), 10_000);
    await goesOn();
    expect(logOf(s)).not.toContain(s.password);
  }, 60_000);
});
