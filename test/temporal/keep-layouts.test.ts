/**
 * CUTOVER_KEEP_LAYOUTS in Temporal mode: the environment's workflow keeps as many earlier layouts
 * as the process that started the last migration says (it cannot read the environment itself), and
 * a bad value is refused before anything starts, as in local mode. Real dev server, a real `cutover
 * worker`, the gated fixture's exec scripts with the gate released.
 */
import { describe, expect, it } from 'vitest';
import { runBinary } from '../support/cli.js';
import { releaseGate, setVersion, workspace } from '../support/migrations.js';
import {
  cleanupsAfterEach,
  sharedTemporal,
  startWorker,
  type TemporalTarget,
  temporalEnv,
  uniqueName,
} from './robustness-helpers.js';

const cleanups = cleanupsAfterEach();

describe('CUTOVER_KEEP_LAYOUTS in Temporal mode', () => {
  it('is refused when bad, and with 1 only the layout before the current one is kept', async () => {
    const t: TemporalTarget = { address: sharedTemporal(), taskQueue: uniqueName('keep') };
    const environment = uniqueName('keep');
    const ws = await workspace('test/fixtures/gated', (y) =>
      y.replace('name: gated', `name: ${environment}`),
    );
    cleanups.push(() => ws.cleanup());
    await startWorker(t, ws.stateDir);
    releaseGate(ws);
    // The binary: the engine reads CUTOVER_KEEP_LAYOUTS from its process's environment.
    const cli = (args: string[], keep: string) =>
      runBinary([...args, '-f', ws.file], { env: { ...temporalEnv(t), CUTOVER_KEEP_LAYOUTS: keep } });

    const bad = await cli(['topology', 'migrate', '--yes'], '0');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('CUTOVER_KEEP_LAYOUTS=0: not a whole number of at least 1');
    const nothing = await cli(['topology', 'migration', 'list', '--environment', environment, '--json'], '1');
    expect(JSON.parse(nothing.stdout).items).toEqual([]);

    for (const version of ['1', '2', '3']) {
      setVersion(ws, 'api', version);
      const migrated = await cli(['topology', 'migrate', '--yes'], '1');
      expect(migrated.code, migrated.stderr).toBe(0);
    }
    // Serial 3 is current; of the earlier ones only serial 2 is kept.
    const gone = await cli(['topology', 'rollback', '--to', 'serial:1'], '1');
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain(`${environment}: layout serial 1 is no longer kept`);
    const kept = await cli(['topology', 'rollback', '--to', 'previous'], '1');
    expect(kept.stderr).toContain(`Rolling ${environment} back from serial 3 to the layout of serial 2`);
  }, 180_000);
});
