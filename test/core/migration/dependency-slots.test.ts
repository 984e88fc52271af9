/**
 * Which slot of each dependency a driver call reaches (core/migration/dependency-slots.ts), on the
 * states of a real migration driven through the step function: green reaches the green slots of
 * the dependencies replaced with it and the live slots of those kept; the live layout (blue, a
 * restart in place) reaches the live slots; the Temporal activity's view of the state gives the same.
 */
import { describe, expect, it } from 'vitest';
import { commandView } from '../../../core/migration/command-view.js';
import { dependencySlots } from '../../../core/migration/dependency-slots.js';
import type { Command, MigrationState } from '../../../core/migration/types.js';
import { resolveReferences } from '../../../core/topology/dependency-refs.js';
import { clone, shopDoc, type TopologyDoc } from '../../support/builders.js';
import { Driver, specOf } from '../../support/migration-builders.js';

/** shop, with a kept `cache` beside `db`, and api's env referring to both. */
function refsDoc(): TopologyDoc {
  const doc = shopDoc();
  doc.components.cache = {
    driver: 'apps',
    version: '7',
    run: { command: ['node', 'cache.js'] },
    replicas: 2,
  };
  doc.components.api = {
    ...doc.components.api,
    dependsOn: ['cache', 'db'],
    env: {
      DATABASE_URL: { ref: 'db', format: 'postgres://app@{host}:{port}/app' },
      CACHE: { ref: 'cache', format: '{addresses}' },
    },
  };
  doc.strategy = { commit: 'manual', bake: '0s' };
  return doc;
}

const greenAddress: Record<string, string> = {
  db: '127.0.0.1:6100',
  api: '127.0.0.1:6200',
  web: '127.0.0.1:6300',
};

/** Runs the migration of db 15 → 16 until `until` is in flight (every call succeeds). */
function runUntil(until: (c: Command) => boolean): { state: MigrationState; command: Command } {
  const before = refsDoc();
  const after = clone(before);
  after.components.db = { ...after.components.db, version: '16' };
  const spec = specOf(before, after, 'mig_refs');
  spec.base.slots = {
    ...spec.base.slots,
    db: { component: 'db', slot: 'blue', version: '15', addresses: ['127.0.0.1:5100'] },
    cache: {
      component: 'cache',
      slot: 'blue',
      version: '7',
      addresses: ['127.0.0.1:5400', '127.0.0.1:5401'],
    },
  };
  const d = new Driver(spec);
  for (let i = 0; i < 100; i++) {
    const c = d.state.inflight[0];
    if (!c) break;
    if (until(c)) return { state: d.state, command: c };
    const output =
      c.kind === 'provision'
        ? {
            component: c.component,
            slot: 'green' as const,
            version: 'x',
            addresses: [greenAddress[c.component] as string],
          }
        : undefined;
    d.event(
      output
        ? { type: 'command_succeeded', commandId: c.id, output }
        : { type: 'command_succeeded', commandId: c.id },
    );
  }
  throw new Error('the command never came');
}

describe('the slots of dependencies a call reaches', () => {
  it('the plan replaces api because db is, and says which env refers to it', () => {
    const { state } = runUntil((c) => c.kind === 'provision');
    const api = state.spec.plan.resources.find((r) => r.name === 'api');
    expect(api?.change).toBe('replace');
    expect(api?.reason).toBe('dependency db is replaced (env DATABASE_URL refers to it)');
  });

  it("green api reaches db's green slot (replaced with it) and cache's live slot (kept)", () => {
    const { state, command } = runUntil((c) => c.kind === 'provision' && c.component === 'api');
    const green = dependencySlots(state, 'api', 'green');
    expect(green).toEqual({
      cache: { slot: 'blue', addresses: ['127.0.0.1:5400', '127.0.0.1:5401'] },
      db: { slot: 'green', addresses: ['127.0.0.1:6100'] },
    });
    expect(resolveReferences('api', state.spec.desired.components.api as never, green).env).toEqual({
      CACHE: '127.0.0.1:5400,127.0.0.1:5401',
      DATABASE_URL: 'postgres://app@127.0.0.1:6100/app',
    });
    // Blue api keeps what it had: the live slots.
    expect(dependencySlots(state, 'api', 'live')).toEqual({
      cache: { slot: 'blue', addresses: ['127.0.0.1:5400', '127.0.0.1:5401'] },
      db: { slot: 'blue', addresses: ['127.0.0.1:5100'] },
    });
    // The Temporal activity gets commandView(state, command): the same slots are in it.
    const view = commandView(state, command);
    expect(dependencySlots(view, 'api', 'green')).toEqual(green);
    expect(dependencySlots(view, 'api', 'live')).toEqual(dependencySlots(state, 'api', 'live'));
  });

  it('the gate of green api (its command probe) and green web reach green too', () => {
    const { state, command } = runUntil((c) => c.kind === 'check_health' && c.component === 'api');
    expect(dependencySlots(commandView(state, command), 'api', 'green').db).toEqual({
      slot: 'green',
      addresses: ['127.0.0.1:6100'],
    });
    expect(dependencySlots(state, 'web', 'green')).toEqual({
      api: { slot: 'green', addresses: ['127.0.0.1:6200'] },
    });
  });

  it("the drain of blue api reaches db's blue slot", () => {
    const { state, command } = runUntil((c) => c.kind === 'drain' && c.component === 'api');
    expect(dependencySlots(commandView(state, command), 'api', 'live')).toEqual({
      cache: { slot: 'blue', addresses: ['127.0.0.1:5400', '127.0.0.1:5401'] },
      db: { slot: 'blue', addresses: ['127.0.0.1:5100'] },
    });
  });
});
