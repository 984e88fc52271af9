/** The migration views with several actions in flight: each running action is marked, done ones ticked. */
import { describe, expect, it } from 'vitest';
import { summaryOf } from '../../core/migration/summary.js';
import { renderLiveView, renderMigration } from '../../views/render-migration.js';
import { plainStyle } from '../../views/style.js';
import type { TopologyDoc } from '../support/builders.js';
import { Driver, specOf } from '../support/migration-builders.js';

function wide(): TopologyDoc {
  const components: TopologyDoc['components'] = {};
  for (const name of ['a', 'b', 'c', 'd', 'e']) {
    components[name] = { driver: 'apps', version: '1', run: { command: ['node', `${name}.js`] } };
  }
  return {
    apiVersion: 'cutover/v1',
    kind: 'Topology',
    metadata: { name: 'shop' },
    drivers: { apps: { type: 'process' } },
    components,
  };
}

describe('migration views with actions in parallel', () => {
  it('marks every running action and ticks one done after the first still running', () => {
    const d = new Driver({ ...specOf(null, wide()), parallelism: 4 });
    // Complete the second provision first: b is done while a still runs.
    const second = d.state.inflight[1];
    if (!second) throw new Error('expected several commands in flight');
    d.event({
      type: 'command_succeeded',
      commandId: second.id,
      output: { component: 'b', slot: 'green', version: '1', addresses: [] },
    });
    const text = renderMigration(summaryOf(d.state), d.state, plainStyle);
    expect(text).toMatch(/▶ provision_green:a/);
    expect(text).toMatch(/✓ provision_green:b/);
    expect(text).toMatch(/▶ provision_green:c/);
    expect(text).toMatch(/▶ provision_green:e/);
    const live = renderLiveView(d.state, [], plainStyle);
    expect(live).toContain('now: provision_green:a, provision_green:c, provision_green:d (+1 more)');
    expect(live).toContain('provision_green 1/5');
  });
});
