import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { StateDir } from '../../../engine/store/state-dir.js';

describe('StateDir', () => {
  it('owns the layout docs/state-directory.md lists, under an absolute root', () => {
    const state = StateDir.at('/var/lib/cutover');
    expect(state.layoutFile('prod')).toBe('/var/lib/cutover/environments/prod/layout.json');
    expect(state.layoutHistoryFile('prod', 7)).toBe('/var/lib/cutover/environments/prod/layouts/7.json');
    expect(state.activeFile('prod')).toBe('/var/lib/cutover/environments/prod/active.json');
    expect(state.migration('prod', 'mig_1')).toEqual({
      dir: '/var/lib/cutover/environments/prod/migrations/mig_1',
      journal: '/var/lib/cutover/environments/prod/migrations/mig_1/journal.ndjson',
      log: '/var/lib/cutover/environments/prod/migrations/mig_1/log.ndjson',
      runner: '/var/lib/cutover/environments/prod/migrations/mig_1/runner.json',
      runnerOutput: '/var/lib/cutover/environments/prod/migrations/mig_1/runner.out',
      processes: '/var/lib/cutover/environments/prod/migrations/mig_1/processes',
      replication: '/var/lib/cutover/environments/prod/migrations/mig_1/replication.json',
      notifications: '/var/lib/cutover/environments/prod/migrations/mig_1/notifications.ndjson',
    });
    expect(state.slotDir('prod', 'api-m1')).toBe('/var/lib/cutover/environments/prod/slots/api-m1');
    expect(state.routingTableFile()).toBe('/var/lib/cutover/router/routes.json');
    expect(state.routerRecordFile()).toBe('/var/lib/cutover/router/router.json');
    expect(state.idempotencyDir()).toBe('/var/lib/cutover/server/idempotency');
    expect(state.hookDeliveriesDir()).toBe('/var/lib/cutover/server/hook-deliveries');
    expect(state.watchCacheDir()).toBe('/var/lib/cutover/watch/cache');
    expect(state.watchTreesDir('prod')).toBe('/var/lib/cutover/watch/trees/prod');
    expect(state.watchHooksDir()).toBe('/var/lib/cutover/watch/hooks');
  });

  it('names the same files as path.join whatever form the directory was given in', () => {
    for (const given of ['state', './state/', 'state//', '/', '/tmp/x/../state']) {
      const state = StateDir.at(given);
      expect(path.isAbsolute(state.root)).toBe(true);
      expect(state.activeFile('e')).toBe(path.join(path.resolve(given), 'environments', 'e', 'active.json'));
      expect(`${state}`).toBe(path.resolve(given));
    }
  });

  it('is beside the topology file unless CUTOVER_STATE_DIR names it', () => {
    expect(StateDir.for('/srv/app/topology.yaml', {}).root).toBe('/srv/app/.cutover');
    expect(StateDir.for('/srv/app/topology.yaml', { CUTOVER_STATE_DIR: '/data/state' }).root).toBe(
      '/data/state',
    );
  });
});
