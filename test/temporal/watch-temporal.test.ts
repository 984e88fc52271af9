/**
 * `cutover watch` with WORKFLOW_HOST: it plans against the layout kept in Temporal, and `--apply`
 * starts the migration there (a `cutover worker` runs it), nothing in a local state directory.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { cleanUp, initRepo, scratch, trackStateDir } from '../support/git.js';
import {
  cleanupsAfterEach,
  connectClient,
  isFinalState,
  sharedTemporal,
  startWorker,
  type TemporalTarget,
  temporalEnv,
  uniqueName,
  waitForState,
} from './robustness-helpers.js';

const cleanups = cleanupsAfterEach(cleanUp);

describe('cutover watch in Temporal mode', () => {
  it('--once --apply starts the migration in Temporal; the next plan is against its layout', async () => {
    const t: TemporalTarget = { address: sharedTemporal(), taskQueue: uniqueName('watch') };
    const environment = uniqueName('watch');
    const repo = await initRepo('examples/exec-demo');
    repo.write(repo.read().replace('name: exec-demo', `name: ${environment}`));
    const head = await repo.commit('own environment name');
    const root = await scratch();
    const out = path.join(root, 'out');
    const localState = trackStateDir(path.join(root, 'state'));
    await startWorker(t, trackStateDir(path.join(root, 'worker-state')));
    const args = ['watch', '--repo', repo.dir, '--out', out, '--state-dir', localState, '--once'];

    const applied = await runCli([...args, '--apply'], { env: temporalEnv(t) });
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(applied.stdout).toMatch(
      new RegExp(`${head.short} topology\\.yaml \\(${environment}\\): Plan: 2 to add`),
    );
    const started = new RegExp(
      `${head.short} topology\\.yaml \\(${environment}\\): migration (\\S+) started`,
    ).exec(applied.stdout);
    expect(started, applied.stdout).not.toBeNull();
    const id = (started as RegExpExecArray)[1] as string;

    const client = await connectClient(t);
    cleanups.push(() => client.close());
    const ended = await waitForState(client, id, isFinalState, 60_000);
    expect(ended.lifecycle).toBe('completed');
    expect((await client.currentLayout(environment)).serial).toBe(1);
    // Nothing was kept locally.
    expect(existsSync(path.join(localState, 'environments'))).toBe(false);

    // The same head planned again: against Temporal's layout, so nothing to change.
    const again = await runCli([...args, '--out', path.join(root, 'out2')], { env: temporalEnv(t) });
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(again.stdout).toMatch(
      new RegExp(`${head.short} topology\\.yaml \\(${environment}\\): no changes`),
    );
  }, 120_000);
});
