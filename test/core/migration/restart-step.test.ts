/**
 * A restart in place through the step function: the `restart` command, then a health check of the
 * live slot, then the commit records the restarted slot; no green slot, no traffic, nothing to undo.
 */
import { describe, expect, it } from 'vitest';
import { committedLayout } from '../../../core/migration/committed-layout.js';
import { replay } from '../../../core/migration/step.js';
import type { Command, MigrationEvent } from '../../../core/migration/types.js';
import type { ObservedLayout } from '../../../core/observed.js';
import { shopDoc, type TopologyDoc } from '../../support/builders.js';
import { Driver, specOf } from '../../support/migration-builders.js';

function workerDoc(): TopologyDoc {
  const doc = shopDoc();
  doc.components.worker = {
    driver: 'apps',
    version: '1.0.0',
    run: { command: ['node', 'w.js'] },
    replicas: 2,
  };
  doc.strategy = { commit: 'auto', bake: '0s' };
  return doc;
}

/** The worker's two replicas observed dead, everything else running. */
function workerDown(doc: TopologyDoc): ObservedLayout {
  const components: ObservedLayout['components'] = {};
  for (const [name, spec] of Object.entries(doc.components)) {
    const count = (spec.replicas as number | undefined) ?? 1;
    const state = name === 'worker' ? ('not_running' as const) : ('running' as const);
    components[name] = {
      component: name,
      slot: 'blue',
      version: String(spec.version),
      replicas: Array.from({ length: count }, (_, i) => ({ address: `127.0.0.1:${5000 + i}`, state })),
    };
  }
  return { environment: 'shop', observedAt: '2026-11-25T10:00:00.000Z', components, routes: {} };
}

const restarted = {
  component: 'worker',
  slot: 'blue' as const,
  version: '1.0.0',
  addresses: ['127.0.0.1:5000', '127.0.0.1:5009'],
  details: { slotId: 'worker-mig_0', replicas: [{ pid: 4242 }, { pid: 4243 }] },
};

/** Drives the migration; the restart answers with the restarted slot, `fail` fails a command. */
function drive(fail: (c: Command) => boolean = () => false): { d: Driver; journal: MigrationEvent[] } {
  const doc = workerDoc();
  const spec = specOf(doc, doc, 'mig_restart', { observed: workerDown(doc) });
  const d = new Driver(spec);
  const journal: MigrationEvent[] = [{ type: 'created', at: spec.createdAt, spec }];
  for (let i = 0; i < 50 && d.state.inflight[0]; i++) {
    const c = d.state.inflight[0];
    const event = fail(c)
      ? ({ type: 'command_failed', commandId: c.id, error: { message: 'boom', retryable: false } } as const)
      : c.kind === 'restart'
        ? ({ type: 'command_succeeded', commandId: c.id, output: restarted } as const)
        : ({ type: 'command_succeeded', commandId: c.id } as const);
    d.event(event);
    journal.push({ ...event, at: d.clock });
  }
  return { d, journal };
}

describe('a restart in place in the step function', () => {
  it('restarts, checks the live slot, commits with the restarted slot recorded', () => {
    const { d, journal } = drive();
    expect(d.state.lifecycle).toBe('completed');
    expect(d.log.map(({ id: _id, ...c }) => c)).toEqual([
      { kind: 'restart', component: 'worker' },
      { kind: 'check_health', component: 'worker', deadlineMs: 0, slot: 'blue' },
      { kind: 'record_layout' },
    ]);
    expect(d.notices.map((n) => n.message)).toContain('health gate passed: restarted worker is healthy');
    const layout = committedLayout(d.state);
    expect(layout.slots?.worker).toEqual(restarted);
    expect(layout.slots?.api?.addresses).toEqual(['127.0.0.1:13000']);
    expect(replay(journal)).toEqual(d.state);
  });

  it('a failed health check fails the migration: nothing to undo, the restart is not taken back', () => {
    const { d } = drive((c) => c.kind === 'check_health');
    expect(d.state.lifecycle).toBe('failed');
    expect(d.state.ending?.steps).toEqual([]);
    expect(d.log.map((c) => c.kind)).toEqual(['restart', 'check_health']);
    expect(d.notices.map((n) => n.message)).toContain(
      'rolling back: nothing to undo (replicas restarted in place were down before; they stay)',
    );
  });
});
