/**
 * The step function running the plan as a graph, several commands in flight: whatever order the
 * completions arrive in, the journal replays to the state the runner had, the migration ends in the
 * same state, no action starts before what it waits for is done, and the bound holds. A failure
 * stops new starts, aborts the calls in flight and rolls back dependents first, independent undo
 * steps at once under the same bound.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { replay, start, step } from '../../../core/migration/step.js';
import type {
  Command,
  MigrationEvent,
  MigrationSpec,
  MigrationState,
  Notice,
} from '../../../core/migration/types.js';
import type { TopologyDoc } from '../../support/builders.js';
import { specOf } from '../../support/migration-builders.js';

/** Components c0…c(n-1), each depending on some earlier ones, a route to the last one. */
function layoutDoc(deps: number[][], version: string, shift: number[]): TopologyDoc {
  const components: TopologyDoc['components'] = {};
  deps.forEach((ds, i) => {
    components[`c${i}`] = {
      driver: 'apps',
      version,
      run: { command: ['node', `c${i}.js`] },
      dependsOn: [...new Set(ds)].map((d) => `c${d}`),
    };
  });
  return {
    apiVersion: 'cutover/v1',
    kind: 'Topology',
    metadata: { name: 'shop' },
    drivers: { apps: { type: 'process' } },
    components,
    routes: { public: { listen: '127.0.0.1:18080', to: `c${deps.length - 1}`, shift } },
    strategy: { commit: 'auto', bake: '0s' },
  };
}

const graphArb = fc
  .integer({ min: 1, max: 7 })
  .chain((n) =>
    fc.tuple(
      ...Array.from({ length: n }, (_, i) =>
        i === 0
          ? fc.constant([] as number[])
          : fc.array(fc.integer({ min: 0, max: i - 1 }), { maxLength: 2 }),
      ),
    ),
  );

const shiftArb = fc.constantFrom([100], [10, 100], [10, 50, 100]).map((s) => [...s]);

/** Every component replaced (version 1 → 2): provisions, gates, a shift, drains and retirements. */
function specFor(deps: number[][], shift: number[], parallelism: number | undefined): MigrationSpec {
  const spec = specOf(layoutDoc(deps, '1', [100]), layoutDoc(deps, '2', shift));
  return parallelism === undefined ? spec : { ...spec, parallelism };
}

interface Run {
  state: MigrationState;
  journal: MigrationEvent[];
  notices: Notice[];
  issued: Command[];
  maxInFlight: number;
  /** The event count at which each command was issued, and at which its result came. */
  issuedAt: Map<string, number>;
  endedAt: Map<string, number>;
  /** The most retirements in flight at once. */
  maxRetiring: number;
}

/**
 * Drives a migration to its end: at each step one command in flight completes, the one `choices`
 * picks (the oldest once they run out); `fail` names a command that fails permanently.
 */
function drive(spec: MigrationSpec, choices: readonly number[], fail?: (c: Command) => boolean): Run {
  const t = start(spec);
  const run: Run = {
    state: t.state,
    journal: [{ type: 'created', at: spec.createdAt, spec }],
    notices: [...t.notices],
    issued: [...t.commands],
    maxInFlight: t.state.inflight.length,
    issuedAt: new Map(t.commands.map((c) => [c.id, 0])),
    endedAt: new Map(),
    maxRetiring: 0,
  };
  let at = spec.createdAt;
  for (let i = 0; i < 2_000 && run.state.inflight.length > 0; i++) {
    const pick = choices[i] ?? 0;
    const c = run.state.inflight[pick % run.state.inflight.length] as Command;
    at += 1;
    let event: MigrationEvent;
    if (run.state.cancelling.includes(c.id)) {
      event = { type: 'command_cancelled', at, commandId: c.id, elapsedMs: 1 };
    } else if (fail?.(c)) {
      event = { type: 'command_failed', at, commandId: c.id, error: { message: 'boom', retryable: false } };
    } else if (c.kind === 'provision') {
      const output = {
        component: c.component,
        slot: 'green' as const,
        version: '2',
        addresses: ['127.0.0.1:9'],
      };
      event = { type: 'command_succeeded', at, commandId: c.id, output };
    } else {
      event = { type: 'command_succeeded', at, commandId: c.id };
    }
    const next = step(run.state, event);
    run.journal.push(event);
    run.state = next.state;
    run.notices.push(...next.notices);
    run.issued.push(...next.commands);
    run.endedAt.set(c.id, i + 1);
    for (const issued of next.commands) run.issuedAt.set(issued.id, i + 1);
    run.maxInFlight = Math.max(run.maxInFlight, run.state.inflight.length);
    const retiring = run.state.inflight.filter((x) => x.kind === 'retire').length;
    run.maxRetiring = Math.max(run.maxRetiring, retiring);
  }
  return run;
}

/** What a migration leaves behind, without the command numbers and times that depend on the order. */
function outcome(s: MigrationState) {
  return {
    lifecycle: s.lifecycle,
    done: s.done,
    cursor: s.cursor,
    running: s.running.length,
    inflight: s.inflight.length,
    slots: s.slots,
    provisioned: s.provisioned,
    touchedRoutes: [...s.touchedRoutes].sort(),
    layoutRecorded: s.layoutRecorded,
    routesPromoted: s.routesPromoted,
    ending: s.ending?.outcome ?? null,
  };
}

describe('the step function with several commands in flight', () => {
  it('reaches the same end state whatever order completions arrive in, and replays the journal exactly', () => {
    fc.assert(
      fc.property(
        graphArb,
        shiftArb,
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.nat(), { maxLength: 200 }),
        (deps, shift, parallelism, choices) => {
          const spec = specFor(deps, shift, parallelism);
          const inOrder = drive(spec, []);
          const shuffled = drive(spec, choices);
          expect(inOrder.state.lifecycle).toBe('completed');
          expect(outcome(shuffled.state)).toEqual(outcome(inOrder.state));
          // The journal is the record: replayed, it gives the state the runner had, exactly.
          expect(replay(shuffled.journal)).toEqual(shuffled.state);
          expect(shuffled.maxInFlight).toBeLessThanOrEqual(parallelism);
          // No action starts before every action it waits for has succeeded.
          const succeeded = new Set<string>();
          for (const n of shuffled.notices) {
            if (n.kind === 'action_succeeded') succeeded.add(n.actionId as string);
            if (n.kind !== 'action_started') continue;
            const action = spec.plan.actions.find((a) => a.id === n.actionId);
            for (const id of action?.after ?? [])
              expect(succeeded, `${n.actionId} after ${id}`).toContain(id);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('starts independent actions together, up to the bound', () => {
    const deps = Array.from({ length: 12 }, () => [] as number[]);
    const spec = specFor(deps, [100], 5);
    const first = start(spec);
    expect(first.commands.map((c) => c.kind)).toEqual(Array(5).fill('provision'));
    expect(drive(spec, []).maxInFlight).toBe(5);
    // A spec from before the bound (no parallelism) runs one command at a time, as it did.
    expect(start(specFor(deps, [100], undefined)).commands).toHaveLength(1);
  });

  it('on a failure starts nothing more, aborts the calls in flight and retires green dependents first', () => {
    fc.assert(
      fc.property(
        graphArb.filter((d) => d.length >= 2),
        fc.integer({ min: 2, max: 6 }),
        fc.array(fc.nat(), { maxLength: 200 }),
        fc.nat(),
        (deps, parallelism, choices, which) => {
          const spec = specFor(deps, [100], parallelism);
          const failing = `c${which % deps.length}`;
          const run = drive(spec, choices, (c) => c.kind === 'provision' && c.component === failing);
          expect(run.state.lifecycle).toBe('failed');
          const failedAt = run.notices.findIndex((n) => n.kind === 'action_failed');
          expect(failedAt).toBeGreaterThanOrEqual(0);
          expect(run.notices.slice(failedAt).some((n) => n.kind === 'action_started')).toBe(false);
          // Everything in flight at the failure that stands green up was aborted.
          const failure = run.journal.findIndex((e) => e.type === 'command_failed');
          const before = replay(run.journal.slice(0, failure + 1));
          for (const c of before.inflight) {
            if (c.kind === 'provision') expect(before.cancelling).toContain(c.id);
          }
          // Green retired dependents first: a component after every component depending on it.
          const retired = run.issued
            .filter((c) => c.kind === 'retire')
            .map((c) => (c as { component: string }).component);
          expect([...retired].sort()).toEqual([...before.provisioned].sort());
          // Retirements run at once where safe, and still dependents first: a component's green is
          // retired only after the retirement of every component depending on it has ended.
          const retireOf = new Map(
            run.issued.flatMap((c) => (c.kind === 'retire' ? [[c.component, c.id] as const] : [])),
          );
          deps.forEach((ds, i) => {
            const dependent = retireOf.get(`c${i}`);
            for (const d of ds) {
              const dependency = retireOf.get(`c${d}`);
              if (dependency === undefined || dependent === undefined) continue;
              expect(run.issuedAt.get(dependency)).toBeGreaterThanOrEqual(
                run.endedAt.get(dependent) as number,
              );
            }
          });
          expect(run.maxInFlight).toBeLessThanOrEqual(parallelism);
          expect(replay(run.journal)).toEqual(run.state);
        },
      ),
      { numRuns: 200 },
    );
  });
  it('retires independent green slots together after a failure, up to the bound', () => {
    const deps = Array.from({ length: 8 }, () => [] as number[]);
    const spec = specFor(deps, [100], 3);
    // Every provision succeeds; the last component's gate fails: eight green slots to retire.
    const run = drive(spec, [], (c) => c.kind === 'check_health' && c.component === 'c7');
    expect(run.state.lifecycle).toBe('failed');
    expect(run.issued.filter((c) => c.kind === 'retire')).toHaveLength(8);
    expect(run.maxRetiring).toBe(3);
    expect(replay(run.journal)).toEqual(run.state);
    // A journal from before (format 1.1) retires one at a time, as it did.
    const older = drive(
      { ...spec, plan: { ...spec.plan, formatVersion: '1.1' } },
      [],
      (c) => c.kind === 'check_health' && c.component === 'c7',
    );
    expect(older.state.lifecycle).toBe('failed');
    expect(older.maxRetiring).toBe(1);
  });
});
