import { afterEach, describe, expect, it } from 'vitest';
import { readCurrentLayout } from '../engine/store/layout-store.js';
import { StateDir } from '../engine/store/state-dir.js';
import { runCli } from './support/cli.js';
import { type Workspace, workspace } from './support/migrations.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const w of spaces.splice(0)) await w.cleanup();
});

describe('cutover topology down --volumes', () => {
  it('is refused, before anything stops, for an environment whose drivers keep no volumes', async () => {
    const w = await workspace('examples/exec-demo');
    spaces.push(w);
    expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
    const down = await runCli(['topology', 'down', '-f', w.file, '--yes', '--volumes']);
    expect(down.code).toBe(1);
    expect(down.stderr).toBe(
      'cutover: --volumes: environment exec-demo has no component on a driver with volumes (its drivers: exec); only container drivers keep volumes: run topology down without --volumes\n',
    );
    expect((await readCurrentLayout(StateDir.at(w.stateDir), 'exec-demo')).serial).toBe(1);
    expect((await runCli(['topology', 'down', '-f', w.file, '--yes'])).code).toBe(0);
  });
});
