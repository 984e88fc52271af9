/**
 * Faults of the machine outside the state directory's own disk, as a user meets them through the
 * real CLI: a state directory that is a file, an unreadable secret file, a report directory that is
 * a file. Each is exit 1 and one line naming the path, the cause and what to do; none is reported
 * as an internal error (issue 16, "no environment fault is an internal error").
 */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot, runCli, tempDir } from './support/cli.js';
import { cleanUp, initRepo } from './support/git.js';
import { killRunners } from './support/migrations.js';
import { ServerHarness } from './support/server.js';

const servers = new ServerHarness();
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  await servers.cleanup();
  await cleanUp();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** A plain file in a temporary directory, where a directory is expected. */
async function aFile(): Promise<string> {
  const { dir, cleanup } = await tempDir();
  cleanups.push(cleanup);
  const file = path.join(dir, 'not-a-directory');
  writeFileSync(file, 'a file\n');
  return file;
}

function expectOneLine(result: { code: number | null; stderr: string }, line: RegExp): void {
  expect(result.stderr).not.toMatch(/internal error/);
  expect(result.stderr).toMatch(line);
  expect(result.stderr.trim().split('\n')).toHaveLength(1);
  expect(result.code).toBe(1);
}

const topology = path.join(repoRoot, 'examples', 'exec-demo', 'topology.yaml');
const inTheWay =
  'a file is in the way where a directory is expected \\((ENOTDIR|EEXIST)\\); move it away, or choose another directory';

describe.concurrent('environment faults through the CLI', () => {
  it('a state directory that is a file: plan, migrate, proxy and server say so in one line', async () => {
    const file = await aFile();
    const env = { CUTOVER_STATE_DIR: file };
    const line = new RegExp(`^cutover: \\S+ ${file}(/\\S*)?: ${inTheWay}\\n$`);
    expectOneLine(await runCli(['topology', 'plan', '-f', topology], { env }), line);
    expectOneLine(await runCli(['topology', 'migrate', '--yes', '-f', topology], { env }), line);
    expectOneLine(await runCli(['proxy', '--state-dir', file]), line);
    const server = await servers.startRefused({ stateDir: file });
    expect(server.listening).toBe(false);
    expectOneLine(server, line);
  });

  it('a hook secret file that cannot be read names the file', async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const missing = path.join(dir, 'no-such-secret');
    const server = await servers.startRefused({
      stateDir: await servers.stateDir(),
      args: ['--hook-secret-file', missing],
    });
    expect(server.listening).toBe(false);
    expectOneLine(
      server,
      new RegExp(`^cutover: ${missing}: cannot read the hook secret file: ENOENT: no such file or directory`),
    );
  });

  it('a component whose program is not installed, or whose directory is missing: says which, and what to do', async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(async () => {
      killRunners(path.join(dir, '.cutover'));
      await cleanup();
    });
    const file = path.join(dir, 'topology.yaml');
    const topologyWith = (run: string) => `apiVersion: cutover/v1
kind: Topology
metadata: { name: missing-program }
drivers:
  apps: { type: process }
components:
  web:
    driver: apps
    version: "1"
    run: ${run}
    replicas: 1
`;
    writeFileSync(file, topologyWith('{ command: [cutover-no-such-program, serve] }'));
    const missing = await runCli(['topology', 'migrate', '--yes', '-f', file]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(
      /: failed: provision_green:web failed: cannot run cutover-no-such-program serve: program not found \(ENOENT\); install it, put it on the PATH, or give its full path$/m,
    );

    writeFileSync(file, topologyWith(`{ command: [${process.execPath}, -v], cwd: ./nowhere }`));
    const noDir = await runCli(['topology', 'migrate', '--yes', '-f', file]);
    expect(noDir.code).toBe(1);
    expect(noDir.stdout).toMatch(
      new RegExp(
        `: failed: provision_green:web failed: working directory ${path.join(dir, 'nowhere')} of web does not exist$`,
        'm',
      ),
    );
  });

  it('a report directory that is a file: watch --once says so in one line', async () => {
    const repo = await initRepo();
    const out = await aFile();
    const result = await runCli([
      'watch',
      '--repo',
      repo.dir,
      '--once',
      '--out',
      out,
      '--state-dir',
      path.join(path.dirname(out), 'state'),
    ]);
    expectOneLine(result, new RegExp(`^cutover: \\S+ ${out}(/\\S*)?: ${inTheWay}\\n$`));
  });

  it('plan --out naming a directory: one line naming it, and no temporary file left beside it', async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const out = path.join(dir, 'plans');
    mkdirSync(out);
    const result = await runCli(['topology', 'plan', '-f', topology, '--out', out], {
      env: { CUTOVER_STATE_DIR: path.join(dir, 'state') },
    });
    expectOneLine(
      result,
      new RegExp(
        `^cutover: writing ${out}: a directory is where a file is expected \\(EISDIR\\); give the path of a file\\n$`,
      ),
    );
    expect(readdirSync(dir).sort()).toEqual(['plans']);
  });
});
