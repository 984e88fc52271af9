/**
 * The self-heal loop's decisions (when to repair, backoff, the bound), against a fake service: a
 * pure unit test of the loop. The whole repair, with real processes and the router, is in
 * test/e2e/self-heal.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { CutoverError } from '../../../core/errors.js';
import type { CurrentLayout } from '../../../core/layout.js';
import type { MigrationSummary } from '../../../core/migration/summary.js';
import type { Lifecycle } from '../../../core/migration/types.js';
import type { Plan } from '../../../core/plan/types.js';
import { backoffMs, type HealEvent, SelfHeal } from '../../../engine/heal/self-heal.js';
import type { MigrationService } from '../../../engine/services/service-types.js';
import { load, shopDoc } from '../../support/builders.js';

const hour = 3_600_000;

/** A service whose environment drifts while `drifting`, and whose repairs end as told. */
function fakeService() {
  const state = {
    drifting: true,
    inFlight: null as string | null,
    observable: true,
    started: [] as string[],
    lifecycles: new Map<string, Lifecycle>(),
  };
  const layout: CurrentLayout = {
    environment: 'shop',
    serial: 3,
    topology: load(shopDoc()),
    baseDir: '/tmp',
  };
  const summary = (id: string): MigrationSummary =>
    ({
      id,
      lifecycle: state.lifecycles.get(id) ?? 'running',
      status: 'x',
      reason: 'health gate failed',
    }) as MigrationSummary;
  const service = {
    inFlight: async () => state.inFlight,
    currentLayout: async () => layout,
    observe: async () => {
      if (!state.observable) throw new CutoverError('NOT_SUPPORTED', 'observing is not available here');
      return { environment: 'shop', observedAt: '', components: {}, routes: {} };
    },
    plan: async () =>
      ({
        planId: 'sha256:p',
        drift: state.drifting
          ? [{ kind: 'component', name: 'api', reason: '2 of 2 replicas not running' }]
          : [],
      }) as unknown as Plan,
    start: async () => {
      const id = `mig_${state.started.length}`;
      state.started.push(id);
      return { created: true as const, summary: summary(id), planId: 'sha256:p', runs: '', runnerPid: null };
    },
    show: async (id: string) => ({ summary: summary(id), state: {} as never }),
  } as unknown as MigrationService;
  return { state, service };
}

function loop(service: MigrationService, clock: { now: number }, maxRepairsPerHour = 3) {
  const events: HealEvent[] = [];
  const lines: string[] = [];
  const heal = new SelfHeal({
    targets: async () => [{ environment: 'shop', service, fallbackBaseDir: '/tmp' }],
    intervalMs: 1_000,
    maxRepairsPerHour,
    log: (line) => lines.push(line),
    onEvent: (e) => events.push(e),
    now: () => clock.now,
  });
  return { heal, events, lines };
}

describe('self-heal', () => {
  it('starts one repair for drift, logs what drifted and the migration, and waits for it to end', async () => {
    const { state, service } = fakeService();
    const clock = { now: 0 };
    const { heal, events, lines } = loop(service, clock);
    await heal.check();
    expect(state.started).toEqual(['mig_0']);
    expect(lines).toContain(
      'self-heal: shop: component api: 2 of 2 replicas not running; repairing with migration mig_0',
    );
    // While it runs (in flight for the engine too), nothing else starts.
    state.inFlight = 'mig_0';
    await heal.check();
    expect(state.started).toEqual(['mig_0']);
    state.inFlight = null;
    state.lifecycles.set('mig_0', 'completed');
    state.drifting = false;
    await heal.check();
    expect(events.map((e) => e.type)).toEqual(['repair_started', 'repair_completed']);
    expect(state.started).toEqual(['mig_0']);
  });

  it('does nothing without drift, or while another migration is in flight', async () => {
    const { state, service } = fakeService();
    const { heal, events } = loop(service, { now: 0 });
    state.inFlight = 'mig_other';
    await heal.check();
    state.inFlight = null;
    state.drifting = false;
    await heal.check();
    expect(state.started).toEqual([]);
    expect(events).toEqual([]);
  });

  it('backs off after a failed repair, doubling, and tries again after the backoff', async () => {
    const { state, service } = fakeService();
    const clock = { now: 0 };
    const { heal, events } = loop(service, clock, 10);
    await heal.check();
    state.lifecycles.set('mig_0', 'failed');
    await heal.check();
    const failed = events.find((e) => e.type === 'repair_failed');
    expect(failed).toMatchObject({
      migrationId: 'mig_0',
      reason: 'health gate failed',
      retryAt: new Date(2_000).toISOString(),
    });
    clock.now = 1_999;
    await heal.check();
    expect(state.started).toEqual(['mig_0']);
    clock.now = 2_000;
    await heal.check();
    expect(state.started).toEqual(['mig_0', 'mig_1']);
    expect(backoffMs(1_000, 1)).toBe(2_000);
    expect(backoffMs(1_000, 2)).toBe(4_000);
    expect(backoffMs(1_000, 30)).toBe(600_000);
  });

  it('stops healing an environment after the bound of repairs in an hour, and says so', async () => {
    const { state, service } = fakeService();
    const clock = { now: 0 };
    const { heal, events, lines } = loop(service, clock, 2);
    for (let i = 0; i < 4; i++) {
      await heal.check();
      state.lifecycles.set(`mig_${state.started.length - 1}`, 'completed'); // repaired, and drifts again
      clock.now += 60_000;
    }
    expect(state.started).toEqual(['mig_0', 'mig_1']);
    expect(events.at(-1)).toMatchObject({ type: 'heal_stopped', environment: 'shop' });
    expect(lines.at(-1)).toMatch(/stopped healing it: 2 repairs in the last hour did not hold/);
    clock.now += hour;
    await heal.check();
    expect(state.started).toHaveLength(2);
  });

  it('stops, saying why, where the mode cannot observe what runs', async () => {
    const { state, service } = fakeService();
    state.observable = false;
    const { heal, events } = loop(service, { now: 0 });
    await heal.check();
    await heal.check();
    expect(state.started).toEqual([]);
    expect(events).toEqual([
      expect.objectContaining({ type: 'heal_stopped', reason: 'observing is not available here' }),
    ]);
  });
});
