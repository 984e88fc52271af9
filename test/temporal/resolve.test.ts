/**
 * `cutover topology migration resolve` in Temporal mode: a rollback whose green retire keeps
 * failing (the gated fixture's retire script refuses while "fail-retire" exists in the worker's
 * state directory) ends with undo steps left for a person. `resolve --retry --step` runs one again
 * (an Update, sent with the start of a new run of the migration's workflow, which goes on from
 * where it ended), and `resolve --skip` marks the rest resolved; a third resolve is refused by the
 * Update's validator. `list` still shows the migration once, `show` its last state.
 */
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { MigrationState } from '../../core/migration/types.js';
import { runCli } from '../support/cli.js';
import { slotDirs, workspace } from '../support/migrations.js';
import {
  cleanupsAfterEach,
  connectClient,
  inGate,
  isFinalState,
  migrateDetached,
  sharedTemporal,
  startWorker,
  type TemporalTarget,
  temporalEnv,
  uniqueName,
  waitForState,
} from './robustness-helpers.js';

const cleanups = cleanupsAfterEach();

describe('resolve in Temporal mode', () => {
  it('retries one undo step left for a person, skips the rest, and refuses once none is left', async () => {
    const t: TemporalTarget = { address: sharedTemporal(), taskQueue: uniqueName('resolve') };
    const environment = uniqueName('resolve');
    const ws = await workspace('test/fixtures/gated', (y) =>
      y.replace('name: gated', `name: ${environment}`),
    );
    cleanups.push(() => ws.cleanup());
    const client = await connectClient(t);
    cleanups.push(() => client.close());
    await startWorker(t, ws.stateDir);
    const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
      runCli(['topology', 'migration', ...args], { env: { ...temporalEnv(t), ...env } });

    const id = await migrateDetached(t, ws.file);
    await waitForState(client, id, inGate('api'), 30_000);
    expect(slotDirs(ws)).toHaveLength(2); // green db and api
    writeFileSync(path.join(ws.stateDir, 'fail-retire'), '');
    const rolled = await cli(['rollback', id]);
    expect(rolled.code, rolled.stderr).toBe(0);
    const ended = await waitForState(client, id, isFinalState, 120_000);
    expect(ended.lifecycle).toBe('rolled_back');

    const text = await cli(['show', id]);
    expect(text.stdout).toContain('needs a person: 2 of 2 undo steps unresolved');
    expect(text.stdout).toContain(`resolve: cutover topology migration resolve ${id} --retry | --skip`);
    const skipped = ended.ending?.skipped ?? [];
    expect(skipped.map((s) => s.what)).toEqual(['retire green api', 'retire green db']);
    const api = skipped[0]?.command.id as string;

    // --retry --step: the driver works again; that one step runs and is resolved, the other is left.
    rmSync(path.join(ws.stateDir, 'fail-retire'));
    const retried = await cli(['resolve', id, '--retry', '--step', api], { USER: 'ana' });
    expect(retried.code, retried.stderr).toBe(1); // one step is still left
    expect(retried.stdout).toMatch(/retire green api — resolved: retried, done by ana/);
    expect(retried.stdout).toMatch(/retire green db — failed/);
    expect(retried.stdout).toContain(`${id}: rolled back`);
    expect(slotDirs(ws)).toHaveLength(1); // green api is gone now

    const skippedRun = await cli(['resolve', id, '--skip', '--json'], { USER: 'ana' });
    expect(skippedRun.code, skippedRun.stderr).toBe(0);
    const after = JSON.parse(skippedRun.stdout) as {
      skipped: NonNullable<MigrationState['ending']>['skipped'];
    };
    expect(after.skipped.map((s) => s.resolved?.how)).toEqual(['retried', 'skipped']);
    expect(after.skipped.map((s) => s.resolved?.by)).toEqual(['ana', 'ana']);

    // Nothing is left: another resolve is refused with a sentence.
    const again = await cli(['resolve', id, '--skip']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`no undo step of ${id} is left for a person`);

    // One migration, as it stands now, whatever runs its workflow took.
    const listed = JSON.parse((await cli(['list', '--json'])).stdout) as { items: { id: string }[] };
    expect(listed.items.filter((m) => m.id === id)).toHaveLength(1);
    const shown = JSON.parse((await cli(['show', id, '--json'])).stdout) as { state: MigrationState };
    expect(shown.state.ending?.skipped.map((s) => s.resolved?.how)).toEqual(['retried', 'skipped']);
    expect((await cli(['logs', id])).stdout + (await cli(['logs', id])).stderr).toContain(
      'undo step retire green db marked resolved by ana (not run again)',
    );
  }, 240_000);
});
