/**
 * The notifications of a migration, derived from its journal: what a webhook, a chat and the
 * server's event stream get, in order, with ids that a replay gives again.
 */
import { describe, expect, it } from 'vitest';
import { start, step } from '../../../core/migration/step.js';
import type { Command, MigrationEvent, MigrationSpec } from '../../../core/migration/types.js';
import { notificationsOfJournal } from '../../../core/notify/migration-events.js';
import { clone, shopDoc } from '../../support/builders.js';
import { specOf } from '../../support/migration-builders.js';

/** shop with api bumped and its route shifted 10 → 50 → 100. */
function steppedSpec(commit: 'auto' | 'manual' = 'auto'): MigrationSpec {
  const before = shopDoc();
  const after = clone(before);
  after.components.api = { ...after.components.api, version: '2.1.0' };
  after.routes = { public: { listen: '127.0.0.1:18080', to: 'web', shift: [10, 50, 100] } };
  after.components.web = { ...after.components.web, version: '9.9.9' };
  after.strategy = { commit, bake: '0s' };
  return specOf(before, after);
}

/** A journal driven to its end: every command succeeds, unless `fails` says it fails for good. */
function journalOf(spec: MigrationSpec, fails: (c: Command) => boolean = () => false): MigrationEvent[] {
  const events: MigrationEvent[] = [{ type: 'created', at: 1_000, spec }];
  let state = start(spec).state;
  let at = 1_000;
  for (let i = 0; i < 500 && state.inflight[0]; i++) {
    const c = state.inflight[0];
    at += 10;
    const event: MigrationEvent = fails(c)
      ? { type: 'command_failed', at, commandId: c.id, error: { message: 'probe refused', retryable: false } }
      : c.kind === 'provision'
        ? {
            type: 'command_succeeded',
            at,
            commandId: c.id,
            output: { component: c.component, slot: 'green', version: 'x', addresses: ['127.0.0.1:9'] },
          }
        : { type: 'command_succeeded', at, commandId: c.id };
    events.push(event);
    state = step(state, event).state;
  }
  return events;
}

describe('notifications of a migration', () => {
  it('a migration that completes: started, each traffic step of its route, completed; as CloudEvents', () => {
    const spec = steppedSpec();
    const events = notificationsOfJournal(journalOf(spec));
    expect(events.map((e) => [e.type, e.data.route ?? null, e.data.weight ?? null])).toEqual([
      ['dev.cutover.migration.started', null, null],
      ['dev.cutover.migration.step_reached', 'public', 10],
      ['dev.cutover.migration.step_reached', 'public', 50],
      ['dev.cutover.migration.step_reached', 'public', 100],
      ['dev.cutover.migration.completed', null, null],
    ]);
    const completed = events.at(-1);
    expect(completed).toMatchObject({
      specversion: '1.0',
      source: 'cutover/shop',
      subject: 'mig_test',
      datacontenttype: 'application/json',
      data: {
        environment: 'shop',
        migration: 'mig_test',
        severity: 'info',
        baseSerial: 3,
        serial: 4,
        versions: { api: { to: '2.1.0' }, web: { to: '9.9.9' } },
      },
    });
    expect(new Date(completed?.time ?? '').getTime()).toBeGreaterThan(1_000);
    // Ids are unique, and a second reading of the same journal gives the same ones.
    const ids = events.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(notificationsOfJournal(journalOf(spec)).map((e) => e.id)).toEqual(ids);
  });

  it('a manual commit is announced as awaiting commit', () => {
    const names = notificationsOfJournal(journalOf(steppedSpec('manual'))).map((e) => e.data.event);
    expect(names).toEqual(['started', 'step_reached', 'step_reached', 'step_reached', 'awaiting_commit']);
  });

  it('a failed gate: started, then failed with the reason, severity error; the undo is no traffic step', () => {
    const events = notificationsOfJournal(journalOf(steppedSpec(), (c) => c.kind === 'check_health'));
    expect(events.map((e) => e.data.event)).toEqual(['started', 'failed']);
    expect(events[1]?.data.severity).toBe('error');
    expect(events[1]?.data.reason).toMatch(/probe refused/);
  });
});
