/**
 * A migration's two layouts may come from different directories: `cutover topology rollback`
 * migrates to a layout recorded where its file was then, while the live layout's relative paths
 * (an exec driver's `dir`, an nginx `configFile`) resolve where the live layout was migrated from.
 * The live (blue) slot must be drained and retired with its own scripts, not looked for beside the
 * desired topology's file.
 */
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Command, MigrationState } from '../../../core/migration/types.js';
import { createExecDriver } from '../../../engine/drivers/exec-driver.js';
import type { DriverSet } from '../../../engine/runner/execute-command.js';
import { executeCommand } from '../../../engine/runner/execute-command.js';
import { noSecrets } from '../../../engine/secrets/secret-source.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import type { TopologyDoc } from '../../support/builders.js';
import { Driver, specOf } from '../../support/migration-builders.js';
import { resourcesPerTest } from '../../support/resources.js';

const resources = resourcesPerTest();

function queueDoc(version: string): TopologyDoc {
  return {
    apiVersion: 'cutover/v1',
    kind: 'Topology',
    metadata: { name: 'shop' },
    drivers: { infra: { type: 'exec', dir: './infra' } },
    components: { queue: { driver: 'infra', version } },
    strategy: { commit: 'auto', bake: '0s' },
  };
}

/** A directory a topology file was migrated from, whose drain and retire scripts leave a mark. */
async function checkout(root: string, name: string): Promise<string> {
  const dir = path.join(root, name);
  await mkdir(path.join(dir, 'infra'), { recursive: true });
  for (const [stage, mark] of [
    ['drain', 'drained'],
    ['retire', 'retired'],
  ]) {
    await writeFile(path.join(dir, 'infra', stage as string), `#!/bin/sh\ntouch ${mark}-$CUTOVER_SLOT\n`, {
      mode: 0o755,
    });
  }
  return dir;
}

describe('driver calls of a migration whose layouts come from different directories', () => {
  it('drain and retire the live slot with the scripts of the directory the live layout was migrated from', async () => {
    const root = await resources.tempDir('cutover-basedir-');
    const live = await checkout(root, 'now');
    const target = await checkout(root, 'then');
    // Going back from 2.0 (migrated from now/) to 1.0 (recorded from then/).
    const spec = specOf(queueDoc('2.0.0'), queueDoc('1.0.0'));
    spec.base.baseDir = live;
    spec.baseDir = target;
    const driver = new Driver(spec);
    const drivers: DriverSet = { component: { exec: createExecDriver() }, route: {} } as DriverSet;
    const ran: Command['kind'][] = [];
    for (let i = 0; i < 100 && driver.state.inflight[0]; i++) {
      const state: MigrationState = driver.state;
      const command = driver.state.inflight[0];
      if (command.kind === 'drain' || (command.kind === 'retire' && command.slot === 'blue')) {
        const result = await executeCommand(state, command, {
          stateDir: StateDir.at(path.join(root, 'state')),
          drivers,
          secrets: noSecrets,
          signal: new AbortController().signal,
          log: () => {},
        });
        expect(result.type, JSON.stringify(result)).toBe('command_succeeded');
        ran.push(command.kind);
      }
      driver.complete();
    }
    expect(ran).toEqual(['drain', 'retire']);
    expect(existsSync(path.join(live, 'infra', 'drained-blue'))).toBe(true);
    expect(existsSync(path.join(live, 'infra', 'retired-blue'))).toBe(true);
    expect(existsSync(path.join(target, 'infra', 'drained-blue'))).toBe(false);
    expect(existsSync(path.join(target, 'infra', 'retired-blue'))).toBe(false);
  });
});
