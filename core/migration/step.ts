import { assertNever, InvariantError } from '../errors.js';
import { setOwn } from '../records.js';
import { defaults, type Topology } from '../topology/types.js';
import { actionFailed, actionSucceeded, greenLost, onCancelled, recordEffect } from './action-results.js';
import { advanceCommitting, advanceRunning } from './forward.js';
import { type Advanced, notice, transition } from './transition.js';
import type { Command, MigrationEvent, MigrationSpec, MigrationState, Transition } from './types.js';
import { advanceRollingBack, undoFailed, undoSucceeded } from './undo.js';
import { onOperator, onResolve } from './verbs.js';

/**
 * The migration as a pure state machine: `(state, event) → (state, commands)`. No I/O, no clock:
 * time comes in on events. Both runners (local and Temporal) drive this same function, and a
 * journal replayed through it rebuilds the state exactly.
 *
 * It runs the plan as a graph: an action starts once the actions of its `after` are done, up to
 * `spec.parallelism` commands in flight, in plan order among those ready (so parallelism 1 runs the
 * plan one action at a time, in plan order). After the last action before `commit` it waits the
 * bake time, then commits (auto) or waits for an operator (manual). A failed action stops new
 * starts, aborts what is in flight, then rolls back: traffic back to blue first, then green retired.
 * The state depends on the events only, never on when they arrived: the same journal replays to the
 * same state, and completions of independent actions in any order lead to the same end state.
 *
 * This file is the entry (start, step, replay) and the dispatch by lifecycle; the parts live beside
 * it: forward.ts issues the actions, action-results.ts takes their results, undo.ts rolls back,
 * verbs.ts applies the operator's verbs and resolve, queries.ts answers questions about a state,
 * and transition.ts holds what they share to build a transition (notices, numbering, runs).
 */
export function start(spec: MigrationSpec): Transition {
  const state: MigrationState = {
    spec,
    lifecycle: 'running',
    cursor: 0,
    done: [],
    running: [],
    attempt: 1,
    pauseRequested: false,
    inflight: [],
    cancelling: [],
    nextCommand: 1,
    slots: initialSlots(spec),
    touchedRoutes: [],
    provisioned: [],
    bakeRemainingMs: null,
    bakeDone: false,
    layoutRecorded: false,
    routesPromoted: 0,
    ending: null,
    startedAt: spec.createdAt,
    updatedAt: spec.createdAt,
    committedAt: null,
    endedAt: null,
    lastError: null,
  };
  const t = transition(state);
  const n = spec.plan.actions.length;
  notice(
    t,
    spec.createdAt,
    'migration_started',
    'info',
    `migration ${spec.id} started: ${n} action${n === 1 ? '' : 's'}`,
  );
  advance(t, spec.createdAt);
  return t;
}

export function step(previous: MigrationState, event: MigrationEvent): Transition {
  const t = transition({ ...previous, updatedAt: event.at });
  switch (event.type) {
    case 'created':
      throw new InvariantError('a migration is created once');
    case 'operator':
      onOperator(t, event.verb, event.at, event.by, event.full === true);
      break;
    case 'resolve':
      onResolve(t, event.at, event.how, event.step, event.by);
      break;
    case 'command_succeeded': {
      const command = takeResult(t, event.commandId);
      if (!command) return t;
      t.state = { ...t.state, lastError: null };
      recordEffect(t, command, event.output, event.at, event.switched);
      if (t.state.lifecycle === 'rolling_back') undoSucceeded(t, command, event.at);
      else actionSucceeded(t, command, event.at, event.analysis, event.lagging);
      break;
    }
    case 'command_failed': {
      const command = takeResult(t, event.commandId);
      if (!command) return t;
      if (event.error.unhealthy && greenLost(t, command, event.at, event.error.message)) break;
      t.state = { ...t.state, lastError: event.error.message };
      if (t.state.lifecycle === 'rolling_back')
        undoFailed(t, command, event.at, event.error.message, event.error.retryable);
      else actionFailed(t, command, event.at, event.error.message, event.error.retryable);
      break;
    }
    case 'command_cancelled': {
      const command = takeResult(t, event.commandId);
      if (!command) return t;
      onCancelled(t, command, event.elapsedMs);
      break;
    }
    default:
      assertNever(event, 'event');
  }
  advance(t, event.at);
  return t;
}

/** Rebuilds a state from a journal. */
export function replay(events: readonly MigrationEvent[]): MigrationState {
  const [first, ...rest] = events;
  if (first?.type !== 'created') throw new InvariantError('a journal starts with its created event');
  let state = start(first.spec).state;
  for (const event of rest) state = step(state, event).state;
  return state;
}

function initialSlots(spec: MigrationSpec): MigrationState['slots'] {
  const slots: MigrationState['slots'] = {};
  for (const [name, slot] of Object.entries(spec.base.slots ?? {})) setOwn(slots, name, { blue: slot });
  return slots;
}

/** An in-flight command's result arrived: it is no longer in flight. Null for a command not awaited. */
function takeResult(t: Transition, commandId: string): Command | null {
  const s = t.state;
  const command = s.inflight.find((c) => c.id === commandId);
  if (!command) return null;
  t.state = {
    ...s,
    inflight: s.inflight.filter((c) => c !== command),
    cancelling: s.cancelling.includes(commandId)
      ? s.cancelling.filter((id) => id !== commandId)
      : s.cancelling,
  };
  return command;
}

/** The bound a new migration runs under: `--parallelism`, else the topology's, else the default. */
export function migrationParallelism(desired: Topology, requested?: number): number {
  return requested ?? desired.strategy.parallelism ?? defaults.parallelism;
}

/** Issues the commands that may start now, or moves to the next lifecycle state. */
function advance(t: Transition, at: number): void {
  while (advanceState(t, at) === 'again') {
    // A state moved on (running → committing): advance the new one.
  }
}

/** One function per lifecycle state; the switch is exhaustive, so a new state must say what it does. */
function advanceState(t: Transition, at: number): Advanced {
  const lifecycle = t.state.lifecycle;
  switch (lifecycle) {
    case 'running':
      return advanceRunning(t, at);
    case 'committing':
      return advanceCommitting(t, at);
    case 'rolling_back':
      return advanceRollingBack(t, at);
    case 'paused':
    case 'awaiting_promotion':
    case 'awaiting_commit':
      // Waiting for a verb (resume, promote, commit, rollback, cancel): onOperator moves them on.
      return 'settled';
    case 'completed':
    case 'rolled_back':
    case 'cancelled':
    case 'failed':
      // Final: nothing more is ever issued.
      return 'settled';
    default:
      return assertNever(lifecycle, 'lifecycle');
  }
}
