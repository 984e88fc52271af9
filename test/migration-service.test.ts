/**
 * Where cutover's operations run is decided in one place (engine/services/migration-service.ts):
 * a cutover server when one is named, else Temporal when WORKFLOW_HOST is set, else the state
 * directory. The CLI calls the same interface whatever it picked.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type MigrationService,
  openEngineService,
  openMigrationService,
} from '../engine/services/migration-service.js';
import { StateDir } from '../engine/store/state-dir.js';
import { runCli } from './support/cli.js';
import { freePort } from './support/migrations.js';

const opened: MigrationService[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const service of opened.splice(0)) await service.close();
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function open(options: Parameters<typeof openMigrationService>[0]): Promise<MigrationService> {
  const service = await openMigrationService(options);
  opened.push(service);
  return service;
}

describe('openMigrationService', () => {
  it('a server named by --server or CUTOVER_SERVER comes first, then WORKFLOW_HOST, then the state directory', async () => {
    const stateDir = StateDir.at(await mkdtemp(path.join(tmpdir(), 'cutover-open-')));
    dirs.push(stateDir.root);
    const closed = `127.0.0.1:${await freePort()}`;
    const both = { WORKFLOW_HOST: closed, CUTOVER_SERVER: 'http://127.0.0.1:1' };

    const byOption = await open({ stateDir, server: 'https://[::1]:8443', env: both });
    expect([byOption.where, byOption.reachAgain]).toEqual([
      'https://[::1]:8443',
      ' --server https://[::1]:8443',
    ]);
    const byEnv = await open({ stateDir, env: both });
    expect(byEnv.where).toBe('http://127.0.0.1:1');
    // Nothing connects until an operation needs Temporal: opening it at a closed port is no error.
    const temporal = await open({ stateDir, env: { WORKFLOW_HOST: closed } });
    expect([temporal.where, temporal.reachAgain]).toEqual([`WORKFLOW_HOST=${closed}`, '']);
    const local = await open({ stateDir, env: {}, stateDirOption: ' -f app.yaml' });
    expect([local.where, local.reachAgain]).toEqual([stateDir.root, ' -f app.yaml']);
  });

  it('the engine service of a server or a watcher never goes through another server', async () => {
    const stateDir = StateDir.at(await mkdtemp(path.join(tmpdir(), 'cutover-open-')));
    dirs.push(stateDir.root);
    const service = await openEngineService({ stateDir, env: { CUTOVER_SERVER: 'http://127.0.0.1:1' } });
    opened.push(service);
    expect(service.where).toBe(stateDir.root);
  });

  it('a verb a mode cannot do is refused by the service with NOT_SUPPORTED', async () => {
    const service = await open({
      stateDir: StateDir.at('/nonexistent'),
      server: `http://127.0.0.1:${await freePort()}`,
    });
    await expect(service.currentLayout('web')).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
    await expect(service.hostWorker(StateDir.at('/nonexistent'), true)).rejects.toMatchObject({
      code: 'NOT_SUPPORTED',
    });
  });
});

describe('the CLI in Temporal mode', () => {
  it('validates and plans against a file without reaching Temporal, and says so where it must', async () => {
    const env = { WORKFLOW_HOST: `127.0.0.1:${await freePort()}` };
    const after = 'examples/changes/version-bump/after.yaml';
    const before = 'examples/changes/version-bump/before.yaml';
    const validate = await runCli(['topology', 'validate', '-f', after], { env });
    expect(validate.stderr).toBe('');
    expect(validate.code).toBe(0);
    const plan = await runCli(['topology', 'plan', '-f', after, '--against', before, '--json'], { env });
    expect(plan.stderr).toBe('');
    expect(plan.code).toBe(0);
    expect(JSON.parse(plan.stdout).actions.length).toBeGreaterThan(0);
    const recorded = await runCli(['topology', 'plan', '-f', after], { env });
    expect(recorded.code).toBe(1);
    expect(recorded.stderr).toMatch(/^cutover: cannot reach Temporal at WORKFLOW_HOST=127\.0\.0\.1:\d+ /);
  });
});
