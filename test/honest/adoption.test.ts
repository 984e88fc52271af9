/**
 * `cutover server` adopts the orphaned migrations of its state directory: a migration whose runner
 * was SIGKILLed during its bake gets a new runner by itself and completes, whether the server
 * starts after the kill or was already running; two servers on one state directory adopt it once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { releaseGate, type Workspace } from '../support/migrations.js';
import { alive } from '../support/processes.js';
import { ServerHarness, type ServerProcess } from '../support/server.js';
import { eventually } from '../support/wait.js';
import { bakingWorkspace, killRunnerOf, recordedRunner, showJson, startAndWaitFor } from './support.js';

/** The acceptance: a server on the state directory resumes the migration this soon after the kill. */
const resumedWithinMs = 10_000;

const spaces: Workspace[] = [];
const servers = new ServerHarness();
afterEach(async () => {
  for (const ws of spaces.splice(0)) await ws.cleanup();
  await servers.cleanup();
});

/** A migration in its bake (gate released, bake 3 s); `before` runs on its workspace before it starts. */
async function baking(
  before: (ws: Workspace) => Promise<void> = async () => {},
): Promise<{ ws: Workspace; id: string }> {
  const ws = await bakingWorkspace('3s');
  spaces.push(ws);
  await before(ws);
  releaseGate(ws);
  const id = await startAndWaitFor(ws, /bake: waiting/);
  return { ws, id };
}

const adoptionLines = (server: ServerProcess, id: string) =>
  server
    .stderr()
    .split('\n')
    .filter((line) => line.includes(`adopted ${id}`));

/**
 * The acceptance's bound is on the adoption (a new runner within 10 s of the kill); the rest of the
 * bake and the commit follow at the machine's pace (on a loaded one the whole took past 10 s, ci60).
 */
async function adoptedThenCompleted(ws: Workspace, id: string, by: ServerProcess[]): Promise<void> {
  const killedAt = Date.now();
  const stderr = () => by.map((server) => server.stderr()).join('\n');
  await eventually(() => by.some((server) => adoptionLines(server, id).length > 0), resumedWithinMs, stderr);
  expect(Date.now() - killedAt).toBeLessThan(resumedWithinMs + 2_000);
  let last: Awaited<ReturnType<typeof showJson>> | undefined;
  await eventually(
    async () => {
      last = await showJson(ws, id);
      return last.lifecycle === 'completed';
    },
    30_000,
    () => `${JSON.stringify(last)}\n${stderr()}`,
  );
}

describe('cutover server adopts orphaned migrations', () => {
  it('at start: a migration whose runner was killed in its bake is adopted within 10 s, and completes', async () => {
    const { ws, id } = await baking();
    const dead = await killRunnerOf(ws, id);
    const server = await servers.start({ stateDir: ws.stateDir });
    await adoptedThenCompleted(ws, id, [server]);
    const lines = adoptionLines(server, id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`runner (pid ${dead}) had died`);
  }, 60_000);

  it('on its timer: two servers already running adopt it once within 10 s, and it completes', async () => {
    // The servers start before the migration: started during its 3 s bake, on a loaded machine
    // they took longer than the bake (ci80, load 13), the migration completed and released its
    // runner record, and there was no runner left to kill.
    const started: ServerProcess[] = [];
    const { ws, id } = await baking(async (space) => {
      started.push(await servers.start({ stateDir: space.stateDir }));
      started.push(await servers.start({ stateDir: space.stateDir }));
    });
    const [first, second] = started as [ServerProcess, ServerProcess];
    const dead = await killRunnerOf(ws, id);
    await adoptedThenCompleted(ws, id, [first, second]);
    // One adoption over both servers: the runner claim let one new runner drive it.
    const lines = [...adoptionLines(first, id), ...adoptionLines(second, id)];
    expect(lines, `${first.stderr()}\n${second.stderr()}`).toHaveLength(1);
    expect(lines[0]).toContain(`runner (pid ${dead}) had died`);
    expect(alive(dead)).toBe(false);
  }, 60_000);

  it('adopts a paused migration too, which stays paused under its new runner', async () => {
    const ws = await bakingWorkspace('3s');
    spaces.push(ws);
    const id = await startAndWaitFor(ws, /action_started.*health_gate:api/);
    const { runCli } = await import('../support/cli.js');
    const paused = await runCli(['topology', 'migration', 'pause', id, '-f', ws.file]);
    expect(paused.code, paused.stderr).toBe(0);
    await eventually(async () => (await showJson(ws, id)).lifecycle === 'paused', 20_000);
    const dead = await killRunnerOf(ws, id);
    const server = await servers.start({ stateDir: ws.stateDir });
    await eventually(
      () => adoptionLines(server, id).length === 1,
      resumedWithinMs,
      () => server.stderr(),
    );
    const fresh = await recordedRunner(ws, id);
    expect(fresh).not.toBe(dead);
    const shown = await showJson(ws, id);
    expect(shown.lifecycle).toBe('paused');
    expect(shown.runner).toBe('alive');
  }, 60_000);
});
