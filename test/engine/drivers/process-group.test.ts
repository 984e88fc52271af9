import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { groupRunning, stopProcessGroup } from '../../../engine/drivers/process-group.js';
import { isAlive, processIdentity, procStat } from '../../../platform/process-identity.js';
import { eventually } from '../../support/wait.js';

// Real processes in groups of their own; everything started here is killed by pid afterwards.
const started: number[] = [];
afterEach(() => {
  for (const pid of started.splice(0)) {
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
});

function detached(args: string[], command = process.execPath): ChildProcess {
  const child = spawn(command, args, { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  if (child.pid === undefined) throw new Error('no pid');
  started.push(child.pid);
  return child;
}

async function firstLine(child: ChildProcess): Promise<string> {
  let text = '';
  for await (const chunk of child.stdout ?? []) {
    text += String(chunk);
    if (text.includes('\n')) return text.split('\n')[0] ?? '';
  }
  throw new Error('no output');
}

describe('process groups', () => {
  it('a running leader runs; the same pid with another start time is another process', async () => {
    const leader = detached(['-e', 'setInterval(() => {}, 1000)']);
    const identity = processIdentity(leader.pid as number);
    expect(groupRunning(identity)).toBe(true);
    expect(groupRunning({ ...identity, startTime: '1' })).toBe(false);
    expect(await stopProcessGroup(identity, 2_000)).toBe('stopped');
    expect(groupRunning(identity)).toBe(false);
  });

  it('runs while a process of the group outlives its leader, and stopping stops that one too', async () => {
    // The leader starts a child in its own group, prints the child's pid and exits.
    const leader = detached([
      '-e',
      "const c = require('node:child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' }); console.log(c.pid); c.unref(); process.exit(0);",
    ]);
    const identity = processIdentity(leader.pid as number);
    const child = Number(await firstLine(leader));
    started.push(child);
    if (leader.exitCode === null) await once(leader, 'exit');
    expect(isAlive({ pid: child, startTime: null })).toBe(true);

    expect(groupRunning(identity)).toBe(true);
    expect(await stopProcessGroup(identity, 2_000)).toBe('stopped');
    expect(groupRunning(identity)).toBe(false);
    expect(isAlive({ pid: child, startTime: null })).toBe(false);
  });

  it('a leader that exited and waits to be reaped (a zombie) no longer runs', async () => {
    // `setsid` makes the background job a group leader; its parent then execs into a sleep that never
    // reaps it, so it stays a zombie. The job exits only once its parent is that sleep: one that
    // exited first could be reaped by the shell before its exec (ci72, under load: no zombie in 5 s).
    const parent = detached(
      [
        '-c',
        `setsid sh -c 'until [ "$(cat /proc/$PPID/comm)" = sleep ]; do sleep 0.05; done' & echo $!; exec sleep 30`,
      ],
      'sh',
    );
    const zombie = Number(await firstLine(parent));
    const isZombie = () => procStat(zombie)?.[0] === 'Z';
    await eventually(isZombie);
    expect(isZombie()).toBe(true);
    expect(groupRunning({ pid: zombie, startTime: null })).toBe(false);
    expect(await stopProcessGroup({ pid: zombie, startTime: null }, 2_000)).toBe('not-running');
  });
});
