/**
 * Undo steps left for a person: a rollback whose green retire keeps failing (the gated fixture's
 * retire script refuses while "fail-retire" exists) ends with them listed in `show`; `resolve
 * --retry --step` runs one again through a new runner once the driver works, and `resolve --skip`
 * (here through a server, POST /v1/migrations/{id}/resolve) marks the rest resolved by a person.
 */
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { MigrationState } from '../../core/migration/types.js';
import { runCli } from '../support/cli.js';
import type { Workspace } from '../support/migrations.js';
import { ServerHarness } from '../support/server.js';
import { bakingWorkspace, migrationDir, startAndWaitFor } from './support.js';

const spaces: Workspace[] = [];
const servers = new ServerHarness();
afterEach(async () => {
  for (const ws of spaces.splice(0)) await ws.cleanup();
  await servers.cleanup();
});

const greenSlots = (ws: Workspace) =>
  existsSync(path.join(ws.stateDir, 'slots')) ? readdirSync(path.join(ws.stateDir, 'slots')) : [];

describe('resolve: undo steps left for a person', () => {
  it('are listed by show, retried one by one with --retry --step, and marked done with --skip', async () => {
    const ws = await bakingWorkspace();
    spaces.push(ws);
    // api's gate starts once both green slots stand (db's gate may run beside api's provision).
    const id = await startAndWaitFor(ws, /action_started.*health_gate:api/);
    expect(greenSlots(ws)).toHaveLength(2); // green db and api
    writeFileSync(path.join(ws.stateDir, 'fail-retire'), '');
    const rolled = await runCli(['topology', 'migration', 'rollback', id, '-f', ws.file]);
    expect(rolled.stdout).toContain('rolled back');

    // show lists both steps, with their ids, what they were and the error.
    const text = await runCli(['topology', 'migration', 'show', id, '-f', ws.file]);
    expect(text.stdout).toContain('needs a person: 2 of 2 undo steps unresolved');
    expect(text.stdout).toMatch(/c\d+ +retire green api — failed: .*retire refused/);
    expect(text.stdout).toMatch(/c\d+ +retire green db — failed: .*retire refused/);
    expect(text.stdout).toContain(`resolve: cutover topology migration resolve ${id} --retry | --skip`);
    const shown = JSON.parse(
      (await runCli(['topology', 'migration', 'show', id, '-f', ws.file, '--json'])).stdout,
    ) as {
      state: MigrationState;
    };
    const skipped = shown.state.ending?.skipped ?? [];
    expect(skipped.map((s) => s.what)).toEqual(['retire green api', 'retire green db']);
    const api = skipped[0]?.command.id as string;

    // --retry --step: the driver works again; that one step runs and is resolved, the other is left.
    rmSync(path.join(ws.stateDir, 'fail-retire'));
    const retried = await runCli(
      ['topology', 'migration', 'resolve', id, '--retry', '--step', api, '-f', ws.file],
      {
        env: { USER: 'ana' },
      },
    );
    expect(retried.code, retried.stderr).toBe(1); // one step is still left
    expect(retried.stdout).toMatch(/retire green api — resolved: retried, done by ana/);
    expect(retried.stdout).toMatch(/retire green db — failed/);
    expect(retried.stdout).toContain(`${id}: rolled back`);
    expect(greenSlots(ws)).toHaveLength(1); // green api is gone now

    // --skip through a server: the route, journaled with who.
    const { server } = await servers.serve({ stateDir: ws.stateDir, args: ['--no-adopt'] });
    const skippedRun = await runCli(
      ['topology', 'migration', 'resolve', id, '--skip', '--server', server.url, '--json'],
      {
        env: { USER: 'ana' },
      },
    );
    expect(skippedRun.code, skippedRun.stderr).toBe(0);
    const after = JSON.parse(skippedRun.stdout) as {
      skipped: MigrationState['ending'] extends infer E
        ? E extends { skipped: infer S }
          ? S
          : never
        : never;
    };
    expect(after.skipped.map((s) => s.resolved?.how)).toEqual(['retried', 'skipped']);
    const journal = readFileSync(path.join(migrationDir(ws, id), 'journal.ndjson'), 'utf8');
    expect(journal).toMatch(/"type":"resolve".*"how":"retry"/);
    expect(journal).toMatch(/"type":"resolve".*"how":"skip"/);

    // Nothing is left: another resolve is refused with a sentence.
    const again = await runCli(['topology', 'migration', 'resolve', id, '--skip', '-f', ws.file]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`no undo step of ${id} is left for a person`);
  }, 120_000);
});
