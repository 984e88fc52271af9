/**
 * `logs --follow` says why it stopped, on its last line, and its exit code tells the migration
 * ending (0) from the following stopping first: its runner died (3), the connection was lost (4).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type CliResult, runCli } from '../support/cli.js';
import { releaseGate, type Workspace } from '../support/migrations.js';
import { ServerHarness } from '../support/server.js';
import { eventually } from '../support/wait.js';
import { bakingWorkspace, killRunnerOf, startAndWaitFor } from './support.js';

const spaces: Workspace[] = [];
const servers = new ServerHarness();
afterEach(async () => {
  for (const ws of spaces.splice(0)) await ws.cleanup();
  await servers.cleanup();
});

async function heldAtGate(): Promise<{ ws: Workspace; id: string }> {
  const ws = await bakingWorkspace('1s');
  spaces.push(ws);
  const id = await startAndWaitFor(ws, /action_started.*health_gate:api/);
  return { ws, id };
}

const lastLine = (r: CliResult) => r.stderr.trim().split('\n').at(-1) ?? '';

describe('logs --follow says why it ends', () => {
  it('"migration completed", exit 0', async () => {
    const { ws, id } = await heldAtGate();
    const following = runCli(['topology', 'migration', 'logs', id, '-f', ws.file, '--follow']);
    releaseGate(ws);
    const r = await following;
    expect(lastLine(r), r.stderr).toBe('migration completed');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('completed: environment gated is at the new layout');
  }, 60_000);

  it('"rolled back: <reason>", exit 0', async () => {
    const { ws, id } = await heldAtGate();
    const following = runCli(['topology', 'migration', 'logs', id, '-f', ws.file, '--follow']);
    const rolled = await runCli(['topology', 'migration', 'rollback', id, '-f', ws.file], {
      env: { USER: 'ana' },
    });
    expect(rolled.code, rolled.stderr).toBe(0);
    const r = await following;
    expect(lastLine(r), r.stderr).toBe('rolled back: rollback requested by ana');
    expect(r.code).toBe(0);
  }, 60_000);

  it('"runner died (pid N): resume with …", exit 3', async () => {
    const { ws, id } = await heldAtGate();
    const following = runCli(['topology', 'migration', 'logs', id, '-f', ws.file, '--follow']);
    const pid = await killRunnerOf(ws, id);
    const r = await following;
    expect(lastLine(r), r.stderr).toBe(
      `runner died (pid ${pid}): resume with \`cutover topology migration resume ${id} -f ${ws.file}\``,
    );
    expect(r.code).toBe(3);
  }, 60_000);

  it('"connection lost", exit 4, when the server goes away', async () => {
    const { ws, id } = await heldAtGate();
    const server = await servers.start({ stateDir: ws.stateDir });
    const following = runCli(['topology', 'migration', 'logs', id, '--follow', '--server', server.url]);
    // Once the follower holds its stream (the server counts it), the server goes away.
    await eventually(
      async () => /^cutover_log_streams 1$/m.test(await (await fetch(`${server.url}/metrics`)).text()),
      15_000,
    );
    await server.stop('SIGKILL');
    const r = await following;
    expect(lastLine(r), r.stderr).toMatch(
      /^connection lost \(.*\); follow again with `cutover topology migration logs mig_\w+ --follow --server http:\/\/127\.0\.0\.1:\d+`$/,
    );
    expect(r.code).toBe(4);
  }, 60_000);
});
