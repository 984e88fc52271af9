/**
 * A migration whose runner died says so, read at the time of asking: `migration list`, `show`
 * (text and JSON), `logs` and the API name the dead pid and the exact command that resumes it.
 * Real runner processes, killed with SIGKILL by pid.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { releaseGate, type Workspace } from '../support/migrations.js';
import { killChild } from '../support/processes.js';
import { ServerHarness } from '../support/server.js';
import { eventually } from '../support/wait.js';
import {
  bakingWorkspace,
  killRunnerOf,
  migrationDir,
  type ShownSummary,
  startAndWaitFor,
} from './support.js';

/** The acceptance's bound: what a command says about a dead runner is true this soon after the kill. */
const sayItWithinMs = 2_000;

const spaces: Workspace[] = [];
const servers = new ServerHarness();
afterEach(async () => {
  for (const ws of spaces.splice(0)) await ws.cleanup();
  await servers.cleanup();
});

async function heldAtGate(): Promise<{ ws: Workspace; id: string }> {
  const ws = await bakingWorkspace();
  spaces.push(ws);
  // The gate is held (no release-gate file): the migration stays `running (health_gate)`.
  const id = await startAndWaitFor(ws, /action_started.*health_gate:api/);
  return { ws, id };
}

/** The migration in flight as `topology status --json` shows it. */
interface StatusMigration {
  id: string;
  status: string;
  runner?: string;
  resumeWith?: string;
}

/** Runs list, show, show --json, logs, status and status --json at once; their answers. */
async function askEverything(ws: Workspace, id: string) {
  const f = ['-f', ws.file];
  const [list, show, showJson, logs, status, statusJson] = await Promise.all([
    runCli(['topology', 'migration', 'list', ...f, '--json']),
    runCli(['topology', 'migration', 'show', id, ...f]),
    runCli(['topology', 'migration', 'show', id, ...f, '--json']),
    runCli(['topology', 'migration', 'logs', id, ...f]),
    runCli(['topology', 'status', ...f]),
    runCli(['topology', 'status', ...f, '--json']),
  ]);
  return {
    list: JSON.parse(list.stdout) as ShownSummary[] | { items: ShownSummary[] },
    show: show.stdout,
    summary: (JSON.parse(showJson.stdout) as { summary: ShownSummary }).summary,
    logs: logs.stderr,
    status: status.stdout,
    statusMigration: (JSON.parse(statusJson.stdout) as { migration: StatusMigration | null }).migration,
  };
}

function items(list: ShownSummary[] | { items: ShownSummary[] }): ShownSummary[] {
  return Array.isArray(list) ? list : list.items;
}

describe('a migration whose runner died', () => {
  it('says so in list, show, show --json, logs and status (text, --json) within 2 s of a SIGKILL, with the command that resumes it', async () => {
    const { ws, id } = await heldAtGate();
    const pid = await killRunnerOf(ws, id);
    const killedAt = Date.now();
    const died = `runner died (pid ${pid})`;
    const resume = `cutover topology migration resume ${id} -f ${ws.file}`;
    let answer: Awaited<ReturnType<typeof askEverything>> | undefined;
    await eventually(
      async () => {
        answer = await askEverything(ws, id);
        const listed = items(answer.list).find((m) => m.id === id);
        return (
          listed?.status.includes(died) === true &&
          answer.show.includes(died) &&
          answer.summary.runner === 'dead' &&
          answer.logs.includes(died) &&
          answer.status.includes(died) &&
          answer.statusMigration?.runner === 'dead'
        );
      },
      sayItWithinMs,
      () => JSON.stringify(answer, null, 2),
    );
    expect(Date.now() - killedAt).toBeLessThan(sayItWithinMs + 2_000); // the eventually's own bound, plus the last look
    const summary = answer?.summary as ShownSummary;
    expect(summary.status).toBe(`running (health_gate) — ${died}; resume: ${resume}`);
    expect(summary.resumeWith).toBe(resume);
    expect(summary.runnerPid).toBe(null);
    expect(answer?.show).toContain(resume);
    expect(answer?.logs).toContain(resume);
    expect(answer?.status).toContain(resume);
    expect(answer?.statusMigration).toEqual({
      id,
      status: `running (health_gate) — ${died}; resume: ${resume}`,
      runner: 'dead',
      resumeWith: resume,
    });

    // The command it names works: a new runner picks the migration up, and it is alive again.
    const resumed = await runCli(['topology', 'migration', 'resume', id, '-f', ws.file]);
    expect(resumed.code, resumed.stderr).toBe(0);
    const after = (
      JSON.parse((await runCli(['topology', 'migration', 'show', id, '-f', ws.file, '--json'])).stdout) as {
        summary: ShownSummary;
      }
    ).summary;
    expect(after.runner).toBe('alive');
    expect(after.status).toBe('running (health_gate)');
    releaseGate(ws);
  }, 60_000);

  it('is dead when its pid was reused by another program', async () => {
    const { ws, id } = await heldAtGate();
    await killRunnerOf(ws, id);
    // Another program now holds a pid the record names: the record's start time tells them apart.
    const other = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      const file = path.join(migrationDir(ws, id), 'runner.json');
      const record = JSON.parse(readFileSync(file, 'utf8')) as { process: { pid: number } };
      record.process.pid = other.pid as number;
      writeFileSync(file, JSON.stringify(record));
      const shown = await runCli(['topology', 'migration', 'show', id, '-f', ws.file, '--json']);
      const summary = (JSON.parse(shown.stdout) as { summary: ShownSummary }).summary;
      expect(summary.runner).toBe('dead');
      expect(summary.status).toContain(`runner died (pid ${other.pid})`);
    } finally {
      await killChild(other);
    }
  }, 60_000);

  it('says so in the API of a server on that state directory (adoption off)', async () => {
    const { ws, id } = await heldAtGate();
    const { server, api } = await servers.serve({ stateDir: ws.stateDir, args: ['--no-adopt'] });
    const pid = await killRunnerOf(ws, id);
    let body: { summary: ShownSummary } | undefined;
    await eventually(
      async () => {
        body = (await api.get(`/v1/migrations/${id}`)).json as { summary: ShownSummary };
        return body.summary.runner === 'dead';
      },
      sayItWithinMs,
      () => JSON.stringify(body),
    );
    expect(body?.summary.status).toContain(`running (health_gate) — runner died (pid ${pid}); resume: `);
    expect(body?.summary.resumeWith).toMatch(new RegExp(`^cutover topology migration resume ${id} `));
    const list = (await api.get('/v1/migrations')).json as { items: ShownSummary[] };
    expect(list.items.find((m) => m.id === id)?.runner).toBe('dead');
    const environment = (await api.get('/v1/environments/gated')).json as { migration: StatusMigration };
    expect(environment.migration).toMatchObject({ id, runner: 'dead', resumeWith: body?.summary.resumeWith });
    // Through the server, the command that resumes it goes through the server too.
    const remote = await runCli(['topology', 'status', '-f', ws.file, '--json', '--server', server.url]);
    const migration = (JSON.parse(remote.stdout) as { migration: StatusMigration }).migration;
    expect(migration.runner).toBe('dead');
    expect(migration.resumeWith).toBe(`cutover topology migration resume ${id} --server ${server.url}`);
    expect(migration.status).toContain(`; resume: ${migration.resumeWith}`);
  }, 60_000);
});
