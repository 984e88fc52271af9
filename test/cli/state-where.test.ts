/**
 * Issue 29 item 9: a command that reads migrations says which state it read, and status works by
 * the environment's name where there is no topology file (a state directory named some other way).
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../support/cli.js';
import { type Workspace, workspace } from '../support/migrations.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function emptyDir(): Promise<string> {
  const { dir, cleanup } = await tempDir('cutover-where-');
  cleanups.push(cleanup);
  return dir;
}

async function migrated(): Promise<Workspace> {
  const w = await workspace('examples/exec-demo');
  cleanups.push(w.cleanup);
  const done = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(done.code, done.stderr).toBe(0);
  return w;
}

describe('where migrations are read', () => {
  it('an empty list names the state directory it read, and says when it does not exist', async () => {
    const dir = await emptyDir();
    const none = await runCli(['topology', 'migration', 'list'], {
      cwd: dir,
      env: { CUTOVER_STATE_DIR: '' },
    });
    expect(none.code).toBe(0);
    expect(none.stdout).toBe(
      `No migrations in ${path.join(dir, '.cutover')}, which does not exist (pass -f FILE or --state-dir DIR, or set CUTOVER_STATE_DIR).\n`,
    );
    const state = path.join(dir, 'state');
    mkdirSync(state);
    const empty = await runCli(['topology', 'migration', 'list'], {
      cwd: dir,
      env: { CUTOVER_STATE_DIR: state },
    });
    expect(empty.stdout).toBe(`No migrations in ${state}.\n`);
  });

  it('status by the environment name reads no topology file: the same as through the file', async () => {
    const w = await migrated();
    const elsewhere = await emptyDir();
    const byFile = await runCli(['topology', 'status', '-f', w.file, '--json']);
    expect(byFile.code, byFile.stderr).toBe(0);
    const byName = await runCli(['topology', 'status', '--environment', 'exec-demo', '--json'], {
      cwd: elsewhere,
      env: { CUTOVER_STATE_DIR: w.stateDir },
    });
    expect(byName.code, byName.stderr).toBe(0);
    const shown = (text: string) => {
      const { observedAt: _at, ...rest } = JSON.parse(text) as Record<string, unknown>;
      return rest;
    };
    expect(shown(byName.stdout)).toEqual(shown(byFile.stdout));
    expect((JSON.parse(byName.stdout) as { environment: string }).environment).toBe('exec-demo');
  });

  it('status with no topology file names both ways to say which environment', async () => {
    const dir = await emptyDir();
    const result = await runCli(['topology', 'status'], {
      cwd: dir,
      env: { CUTOVER_STATE_DIR: path.join(dir, 's') },
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      'cutover: topology.yaml: no such file (pass the topology with -f FILE, or name its environment with --environment NAME)\n',
    );
  });
});
