/**
 * The tests' own process helpers (test/support/processes.ts): what they read of a child at its
 * exit is all of it, and a cleanup that kills by a recorded pid kills only the recorded process.
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { processIdentity } from '../platform/process-identity.js';
import { exitedAndDrained, killChild, killRecorded, running } from './support/processes.js';

const children: ReturnType<typeof spawn>[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) await killChild(child);
});

function sleeper(options: { detached?: boolean } = {}) {
  const child = spawn('sleep', ['600'], { stdio: 'ignore', detached: options.detached ?? false });
  children.push(child);
  return child;
}

describe('a child read at its exit', () => {
  it('has given all its output, even a large burst written just before it exits', async () => {
    const size = 4 * 1024 * 1024;
    const child = spawn(
      process.execPath,
      ['-e', `process.stderr.write('x'.repeat(${size}) + '\\nlast line\\n'); process.exitCode = 1;`],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exit = await exitedAndDrained(child);
    expect(exit).toEqual({ code: 1, signal: null });
    expect(stderr.length).toBe(size + '\nlast line\n'.length);
    expect(stderr.endsWith('last line\n')).toBe(true);
  });
});

describe('a kill by a recorded pid', () => {
  it('kills the recorded process', async () => {
    const child = sleeper();
    const identity = processIdentity(child.pid as number);
    const exited = exitedAndDrained(child);
    expect(killRecorded(identity)).toBe(true);
    expect((await exited).signal).toBe('SIGKILL');
  });

  it('spares another process that now has the recorded pid (another start time), alone or as a group', () => {
    // A record whose pid was reused: the pid of a live process, the start time of another.
    const child = sleeper({ detached: true });
    const reused = { pid: child.pid as number, startTime: '1' };
    expect(killRecorded(reused)).toBe(false);
    expect(killRecorded(reused, { group: true })).toBe(false);
    expect(running(child.pid as number)).toBe(true);
  });

  it('kills the group of a recorded leader, and never this process', async () => {
    const child = sleeper({ detached: true });
    const exited = exitedAndDrained(child);
    expect(killRecorded(processIdentity(child.pid as number), { group: true })).toBe(true);
    expect((await exited).signal).toBe('SIGKILL');
    expect(killRecorded(processIdentity(process.pid))).toBe(false);
  });
});
