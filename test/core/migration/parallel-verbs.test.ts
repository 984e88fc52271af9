/**
 * Operator verbs with several commands in flight: a pause stops the probes and lets driver calls
 * finish, then nothing new starts until resume; a rollback aborts what is in flight and retires
 * every green slot started, dependents first, independent ones at once.
 */
import { describe, expect, it } from 'vitest';
import type { Command } from '../../../core/migration/types.js';
import type { TopologyDoc } from '../../support/builders.js';
import { Driver, specOf } from '../../support/migration-builders.js';

/** a and b independent; c depends on a. */
function doc(): TopologyDoc {
  const component = (deps: string[] = []) => ({
    driver: 'apps',
    version: '1',
    run: { command: ['node', 'x.js'] },
    dependsOn: deps,
    health: { tcp: {} },
  });
  return {
    apiVersion: 'cutover/v1',
    kind: 'Topology',
    metadata: { name: 'shop' },
    drivers: { apps: { type: 'process' } },
    components: { a: component(), b: component(), c: component(['a']) },
  };
}

function provisioned(component: string): {
  component: string;
  slot: 'green';
  version: string;
  addresses: string[];
} {
  return { component, slot: 'green', version: '1', addresses: ['127.0.0.1:9'] };
}

function inflightKinds(d: Driver): string[] {
  return d.state.inflight.map((c) => `${c.kind} ${'component' in c ? c.component : ''}`.trim()).sort();
}

function find(d: Driver, kind: Command['kind'], component: string): Command {
  const c = d.state.inflight.find((x) => x.kind === kind && 'component' in x && x.component === component);
  if (!c) throw new Error(`${kind} ${component} not in flight: ${inflightKinds(d).join(', ')}`);
  return c;
}

describe('verbs with several commands in flight', () => {
  it('pause: probes stop, driver calls finish, then paused; resume goes on where each action was', () => {
    const d = new Driver({ ...specOf(null, doc()), parallelism: 10 });
    expect(inflightKinds(d)).toEqual(['provision a', 'provision b']);
    d.event({ type: 'command_succeeded', commandId: find(d, 'provision', 'a').id, output: provisioned('a') });
    // a's gate and c's provision start at once beside b's provision.
    expect(inflightKinds(d)).toEqual(['check_health a', 'provision b', 'provision c']);
    const gate = find(d, 'check_health', 'a') as Extract<Command, { kind: 'check_health' }>;
    const t = d.verb('pause');
    expect(t.cancels).toEqual([gate.id]);
    d.event({ type: 'command_cancelled', commandId: gate.id, elapsedMs: 1_000 });
    d.event({ type: 'command_succeeded', commandId: find(d, 'provision', 'b').id, output: provisioned('b') });
    expect(d.state.lifecycle).toBe('running'); // c's provision still runs: nothing new started
    expect(inflightKinds(d)).toEqual(['provision c']);
    d.event({ type: 'command_succeeded', commandId: find(d, 'provision', 'c').id, output: provisioned('c') });
    expect(d.state.lifecycle).toBe('paused');
    expect(d.state.inflight).toEqual([]);
    d.verb('resume');
    // a's gate goes on with the deadline it had left; b's starts beside it (c's waits for a's).
    expect(inflightKinds(d)).toEqual(['check_health a', 'check_health b']);
    expect(find(d, 'check_health', 'a')).toMatchObject({ deadlineMs: gate.deadlineMs - 1_000 });
    d.run();
    expect(d.state.lifecycle).toBe('completed');
  });

  it('rollback: aborts the calls in flight, then retires every green slot, dependents first', () => {
    const d = new Driver({ ...specOf(null, doc()), parallelism: 10 });
    d.event({ type: 'command_succeeded', commandId: find(d, 'provision', 'a').id, output: provisioned('a') });
    const t = d.verb('rollback');
    // Like a failure: probes stop and the provisions still running are aborted (their process groups killed).
    expect([...t.cancels].sort()).toEqual(
      [find(d, 'check_health', 'a').id, find(d, 'provision', 'b').id, find(d, 'provision', 'c').id].sort(),
    );
    expect(t.commands).toEqual([]); // no undo step until the aborted calls have answered
    d.event({ type: 'command_cancelled', commandId: find(d, 'check_health', 'a').id, elapsedMs: 5 });
    d.event({ type: 'command_cancelled', commandId: find(d, 'provision', 'c').id, elapsedMs: 5 });
    expect(inflightKinds(d)).toEqual(['provision b']); // still no undo step, and nothing new
    // A call that finished before its abort reached it counts as done: its slot is retired too.
    d.event({ type: 'command_succeeded', commandId: find(d, 'provision', 'b').id, output: provisioned('b') });
    // Independent undo steps run together: b's and c's green slots; a's waits for c, which depends on it.
    expect(inflightKinds(d)).toEqual(['retire b', 'retire c']);
    d.event({ type: 'command_succeeded', commandId: find(d, 'retire', 'b').id });
    expect(inflightKinds(d)).toEqual(['retire c']);
    d.event({ type: 'command_succeeded', commandId: find(d, 'retire', 'c').id });
    expect(inflightKinds(d)).toEqual(['retire a']);
    d.run();
    expect(d.state.lifecycle).toBe('rolled_back');
    const retired = d.log
      .filter((c) => c.kind === 'retire')
      .map((c) => (c as { component: string }).component);
    expect(retired).toEqual(['c', 'b', 'a']);
  });
});
