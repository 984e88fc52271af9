/**
 * Shared setup of the honest-states tests: a gated migration (test/fixtures/gated) started in a
 * background runner, watched through its log file, and its runner killed by pid.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { runCli } from '../support/cli.js';
import { migrateDetached, type Workspace, workspace } from '../support/migrations.js';
import { waitGone } from '../support/processes.js';
import { eventually } from '../support/wait.js';

export interface ShownSummary {
  id: string;
  lifecycle: string;
  status: string;
  runnerPid: number | null;
  runner: string;
  resumeWith?: string;
}

/** The gated fixture with a bake, so a migration passes its gate (once released) and then waits. */
export function bakingWorkspace(bake = '3s'): Promise<Workspace> {
  return workspace('test/fixtures/gated', (yaml) =>
    yaml.replace('commit: auto', `commit: auto\n  bake: ${bake}`),
  );
}

export function migrationDir(ws: Workspace, id: string): string {
  return path.join(ws.stateDir, 'environments', 'gated', 'migrations', id);
}

/** The migration's log lines so far (the runner's own file). */
export function logText(ws: Workspace, id: string): string {
  const file = path.join(migrationDir(ws, id), 'log.ndjson');
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
}

/** The pid in the migration's runner record, once there is one. */
export async function recordedRunner(ws: Workspace, id: string): Promise<number> {
  const file = path.join(migrationDir(ws, id), 'runner.json');
  let pid = 0;
  await eventually(
    () => {
      if (!existsSync(file)) return false;
      try {
        pid = (JSON.parse(readFileSync(file, 'utf8')) as { process: { pid: number } }).process.pid;
        return true;
      } catch {
        return false;
      }
    },
    15_000,
    () => `no runner record; the migration's log:\n${logText(ws, id)}`,
  );
  return pid;
}

/** Starts a migration in the background and waits until its log says `pattern`. */
export async function startAndWaitFor(ws: Workspace, pattern: RegExp): Promise<string> {
  const id = await migrateDetached(ws);
  await eventually(
    () => pattern.test(logText(ws, id)),
    20_000,
    () => logText(ws, id),
  );
  return id;
}

/** SIGKILLs the migration's runner by pid and waits until it is gone; its pid. */
export async function killRunnerOf(ws: Workspace, id: string): Promise<number> {
  const pid = await recordedRunner(ws, id);
  process.kill(pid, 'SIGKILL');
  await waitGone(pid);
  return pid;
}

export async function showJson(ws: Workspace, id: string): Promise<ShownSummary> {
  const result = await runCli(['topology', 'migration', 'show', id, '-f', ws.file, '--json']);
  // With --json the CLI writes its error on stdout: both, or the failure reads as empty.
  if (result.code !== 0)
    throw new Error(`show failed (exit ${result.code}): ${result.stdout}${result.stderr}`);
  return (JSON.parse(result.stdout) as { summary: ShownSummary }).summary;
}
