/**
 * The CLI through a real `cutover server` (`--server URL`): every command gives the output and exit
 * code of the same command on the local engine, over the same state directory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, runCli } from './support/cli.js';
import {
  freePort,
  releaseGate,
  setVersion,
  type Workspace,
  waitFor,
  workspace,
} from './support/migrations.js';

let w: Workspace;
let server: ChildProcess;
let url = '';

function startServer(stateDir: string, cwd: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [
      path.join(repoRoot, 'bin/cutover.js'),
      'server',
      '--port',
      '0',
      '--state-dir',
      stateDir,
      '--log-level',
      'warn',
    ],
    { cwd, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, CUTOVER_TOKENS: '' } },
  );
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString();
      const match = /listening on (http:\/\/[0-9.:]+)/.exec(err);
      if (match) resolve({ child, url: match[1] as string });
    });
    child.once('exit', (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
}

beforeAll(async () => {
  w = await workspace();
  ({ child: server, url } = await startServer(w.stateDir, w.dir));
});

afterAll(async () => {
  if (server.pid !== undefined && server.exitCode === null) {
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM');
    await exited;
  }
  await w.cleanup();
});

/** Runs the CLI in the workspace, through the server or locally. */
const cli = (args: string[], remote = true) =>
  runCli(remote ? [...args, '--server', url] : args, { cwd: w.dir, env: { CUTOVER_STATE_DIR: w.stateDir } });

describe('the CLI through a cutover server', () => {
  it('validate and plan print what they print locally, with the same exit codes', async () => {
    for (const args of [
      ['topology', 'validate', '-f', 'topology.yaml'],
      ['topology', 'validate', '-f', 'topology.yaml', '--json'],
      ['topology', 'plan', '-f', 'topology.yaml'],
      ['topology', 'plan', '-f', 'topology.yaml', '--format', 'json'],
      ['topology', 'plan', '-f', 'topology.yaml', '--format', 'markdown', '--detailed-exitcode'],
      ['topology', 'validate', '-f', path.join(repoRoot, 'examples/broken/topology.yaml')],
      ['topology', 'plan', '-f', 'missing.yaml'],
    ]) {
      const local = await cli(args, false);
      const remote = await cli(args);
      expect({ args, code: remote.code, stdout: remote.stdout, stderr: remote.stderr }).toEqual({
        args,
        code: local.code,
        stdout: local.stdout,
        stderr: local.stderr,
      });
    }
    const broken = await cli([
      'topology',
      'validate',
      '-f',
      path.join(repoRoot, 'examples/broken/topology.yaml'),
    ]);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/topology\.yaml:16:15 components\.api\.replicas: must be >= 1/);
  });

  it('migrate, list, show, logs, pause, resume, rollback and cancel go through the server', async () => {
    // The gate holds until the test releases it: the migration stays in flight meanwhile.
    const started = await cli(['topology', 'migrate', '-f', 'topology.yaml', '--yes', '--detach']);
    expect(started.code, started.stderr).toBe(0);
    const id = started.stdout.trim();
    expect(id).toMatch(/^mig_[0-9a-z]{26}$/);
    expect(started.stderr).toContain(`--server ${url}`);

    const paused = await cli(['topology', 'migration', 'pause', id.slice(0, 12)]);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toMatch(new RegExp(`^${id}: pa`));
    await waitFor(w, id, (s) => s.lifecycle === 'paused');

    // Compared while paused: a running migration may take a step between the two looks.
    const list = await cli(['topology', 'migration', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(id);
    expect(list.stdout).toEqual((await cli(['topology', 'migration', 'list'], false)).stdout);
    const shown = await cli(['topology', 'migration', 'show', id, '--json']);
    expect(JSON.parse(shown.stdout).summary.lifecycle).toBe('paused');

    const resumed = await cli(['topology', 'migration', 'resume', id]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain(`${id}: running`);

    const rolledBack = await cli(['topology', 'migration', 'rollback', id]);
    expect(rolledBack.code, rolledBack.stderr).toBe(0);
    // It waits for the end, following the log through the server.
    expect(rolledBack.stdout).toMatch(new RegExp(`^${id}: rolled back: rollback requested.*\n$`));
    // The environment's first migration: there is no blue to serve (issue 26, item 11).
    expect(rolledBack.stderr).toContain(
      'rolled back: nothing is serving: the environment had no layout before (a first deployment) (rollback requested',
    );
    const again = await cli(['topology', 'migration', 'rollback', id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^cutover: cannot roll back mig_\w+: it was already rolled back/m);
    expect(again.stderr).toEqual((await cli(['topology', 'migration', 'rollback', id], false)).stderr);

    const logs = await cli(['topology', 'migration', 'logs', id, '--json']);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toEqual((await cli(['topology', 'migration', 'logs', id, '--json'], false)).stdout);
    expect(logs.stdout).toContain('"kind":"paused"');

    const show = await cli(['topology', 'migration', 'show', id]);
    expect(show.stdout).toEqual((await cli(['topology', 'migration', 'show', id], false)).stdout);

    // A second one, cancelled while its gate holds.
    const second = await cli(['topology', 'migrate', '-f', 'topology.yaml', '--yes', '--detach']);
    const id2 = second.stdout.trim();
    const cancelled = await cli(['topology', 'migration', 'cancel', id2]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    const end = await waitFor(w, id2, (s) => s.lifecycle === 'cancelled');
    expect(end.lifecycle).toBe('cancelled');
    const unknown = await cli(['topology', 'migration', 'show', 'mig_zzzz']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^cutover: no migration mig_zzzz/m);
  });

  it('a foreground migrate streams the log from the server and exits 0 when it completes', async () => {
    releaseGate(w);
    const result = await cli(['topology', 'migrate', '-f', 'topology.yaml', '--yes']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('stage health_gate');
    expect(result.stdout).toMatch(/^mig_[0-9a-z]{26}: completed$/m);
    const plan = await cli(['topology', 'plan', '-f', 'topology.yaml', '--detailed-exitcode']);
    expect(plan.code).toBe(0);

    // A failing one exits 1, as locally.
    setVersion(w, 'api', '2');
    rmSync(path.join(w.stateDir, 'release-gate'));
    const pinned = await cli([
      'topology',
      'migrate',
      '-f',
      'topology.yaml',
      '--yes',
      '--plan-id',
      `sha256:${'0'.repeat(64)}`,
    ]);
    expect(pinned.code).toBe(1);
    expect(pinned.stderr).toMatch(
      /^cutover: plan id sha256:0{12} is not a plan of this topology against the live layout \(serial 1\)/m,
    );

    const down = await cli(['topology', 'down', '-f', 'topology.yaml', '--yes']);
    expect(down.code, down.stderr).toBe(0);
    expect(down.stdout).toBe('gated: stopped 2 components and 1 route\n');
    const nothing = await cli(['topology', 'down', '-f', 'topology.yaml', '--json', '--yes']);
    expect(JSON.parse(nothing.stdout)).toEqual({ environment: 'gated', components: [], routes: [] });
  });

  it('says which server it cannot reach', async () => {
    const port = await freePort();
    const result = await runCli(['topology', 'migration', 'list', '--server', `http://127.0.0.1:${port}`], {
      cwd: w.dir,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `cutover: cannot reach the cutover server at http://127.0.0.1:${port}: ECONNREFUSED; check that \`cutover server\` runs there, and the URL (--server or CUTOVER_SERVER)\n`,
    );
  });
});
