import { start, step } from '../migration/step.js';
import type { MigrationEvent, MigrationSpec, MigrationState } from '../migration/types.js';
import { switchNotifications } from './switch-events.js';
import {
  type AnalysisFailure,
  type CloudEvent,
  cloudEventTypePrefix,
  type EventDetail,
  type NotificationData,
  type NotifyEventName,
  type Severity,
} from './types.js';

/** The severity of each event: what a target's `severity` filter compares. */
export const eventSeverity: Record<NotifyEventName, Severity> = {
  started: 'info',
  step_reached: 'info',
  analysis_failed: 'error',
  rolled_back: 'warning',
  cancelled: 'warning',
  awaiting_commit: 'info',
  awaiting_promotion: 'info',
  completed: 'info',
  failed: 'error',
  write_hold_started: 'info',
  write_hold_ended: 'info',
  replication_lagging: 'warning',
  replication_caught_up: 'info',
};

/**
 * The notifications one journaled event causes, from the state before it (null for `created`) and
 * after it. Pure and deterministic: `seq` is the event's line in the journal (1 = created), so a
 * replay of the same journal gives the same events with the same ids, wherever it runs (the runner
 * that delivers, the server that streams).
 *
 * Derived from transitions, never from inside the step function: a lifecycle reached (awaiting
 * commit, completed, rolled back, cancelled, failed), a traffic step applied (a route's green
 * share raised while running forward), or a step of a stateful switch (switch-events.ts).
 */
export function notificationsOf(
  before: MigrationState | null,
  event: MigrationEvent,
  after: MigrationState,
  seq: number,
): CloudEvent[] {
  const spec = after.spec;
  const found: Array<[NotifyEventName, EventDetail]> = [];
  if (event.type === 'created' || before === null) {
    found.push(['started', { message: `migration ${spec.id} of ${spec.environment} started` }]);
  } else {
    const step = event.type === 'command_succeeded' ? stepApplied(before, event.commandId) : null;
    if (step) {
      const names = step.routes.join(', ');
      found.push([
        'step_reached',
        {
          message: `${step.routes.length === 1 ? 'route' : 'routes'} ${names}: ${step.greenPercent} % of traffic on green`,
          ...(step.routes.length === 1 ? { route: step.routes[0] } : {}),
          routes: step.routes,
          weight: step.greenPercent,
        },
      ]);
    }
    found.push(...switchNotifications(before, event, after));
    const failed = analysisFailed(before, after);
    if (failed) found.push(failed);
    if (before.lifecycle !== after.lifecycle) {
      const reached = lifecycleEvent(after);
      if (reached) found.push(reached);
    }
  }
  return found.map(([name, detail], index) => cloudEvent(spec, name, seq, index, event.at, detail));
}

/**
 * A traffic step applied going forward: not the undo (`restore`), not the commit's promotion. One
 * route per command in plans before format 1.2, every moving route at once from 1.2 on.
 */
function stepApplied(
  before: MigrationState,
  commandId: string,
): { routes: string[]; greenPercent: number } | null {
  if (before.lifecycle === 'rolling_back' || before.lifecycle === 'committing') return null;
  const command = before.inflight.find((c) => c.id === commandId);
  if (command?.kind !== 'apply_route' && command?.kind !== 'shift_routes') return null;
  if (command.restore || command.promote || command.greenPercent <= 0) return null;
  const routes = command.kind === 'apply_route' ? [command.route] : command.routes;
  return { routes, greenPercent: command.greenPercent };
}

/** An analysis that breached was just recorded (it rolls back: `rolled_back` follows at the end). */
function analysisFailed(
  before: MigrationState,
  after: MigrationState,
): [NotifyEventName, EventDetail] | null {
  const analyses = after.analyses ?? [];
  if (analyses.length === (before.analyses ?? []).length) return null;
  const last = analyses[analyses.length - 1];
  if (last?.outcome !== 'breach') return null;
  const route = last.routes.find((r) => r.outcome === 'breach');
  const analysis: AnalysisFailure = { check: route?.reason ?? last.reason, weight: last.weight };
  if (route) analysis.route = route.route;
  if (route?.green) analysis.requests = route.green.requests;
  return [
    'analysis_failed',
    {
      message: `${after.spec.id}: analysis failed at the ${last.weight} % step: ${last.reason}; rolling back`,
      reason: last.reason,
      weight: last.weight,
      analysis,
    },
  ];
}

function lifecycleEvent(after: MigrationState): [NotifyEventName, EventDetail] | null {
  const { id, environment } = after.spec;
  const reason = after.ending?.reason ?? after.lastError ?? 'unknown reason';
  switch (after.lifecycle) {
    case 'awaiting_commit':
      return [
        'awaiting_commit',
        { message: `${id} awaits its commit: cutover topology migration commit ${id}` },
      ];
    case 'awaiting_promotion':
      return [
        'awaiting_promotion',
        {
          message: `${id} awaits promotion at a manual hold: cutover topology migration promote ${id} (--full: straight to 100 %)`,
        },
      ];
    case 'completed':
      return [
        'completed',
        {
          message: `${id} completed: environment ${environment} is at the new layout`,
          serial: after.spec.base.serial + 1,
        },
      ];
    case 'rolled_back':
      return ['rolled_back', { message: `${id} rolled back: ${reason}`, reason }];
    case 'cancelled':
      return ['cancelled', { message: `${id} cancelled: ${reason}`, reason }];
    case 'failed':
      return ['failed', { message: `${id} failed and rolled back: ${reason}`, reason }];
    case 'running':
    case 'paused':
    case 'committing':
    case 'rolling_back':
      return null;
    default: {
      const unknown: never = after.lifecycle;
      return unknown;
    }
  }
}

/**
 * One event as CloudEvents 1.0 JSON. Exported for what lands later and emits its own events
 * (`analysis_failed` from the step analysis, `awaiting_promotion` from a manual hold): they give
 * the journal sequence of the event that caused them, and `index` past those above.
 */
export function cloudEvent(
  spec: MigrationSpec,
  name: NotifyEventName,
  seq: number,
  index: number,
  at: number,
  detail: EventDetail,
): CloudEvent {
  const data: NotificationData = {
    environment: spec.environment,
    migration: spec.id,
    event: name,
    severity: eventSeverity[name],
    planId: spec.plan.planId,
    baseSerial: spec.base.serial,
    versions: versionsOf(spec),
    ...detail,
  };
  return {
    specversion: '1.0',
    id: `${spec.id}.${seq}.${index}`,
    source: `cutover/${spec.environment}`,
    type: `${cloudEventTypePrefix}${name}`,
    subject: spec.id,
    time: new Date(at).toISOString(),
    datacontenttype: 'application/json',
    data,
  };
}

/** Version of each component the plan touches: blue's (null when new) → green's (null when removed). */
function versionsOf(spec: MigrationSpec): NotificationData['versions'] {
  const out: NotificationData['versions'] = {};
  for (const resource of spec.plan.resources) {
    if (resource.kind !== 'component') continue;
    const from = spec.base.topology?.components[resource.name]?.version ?? null;
    const to = spec.desired.components[resource.name]?.version ?? null;
    out[resource.name] = { from, to };
  }
  return out;
}

/** Every notification of a journal, in order: what a reader replays from the first line. */
export function notificationsOfJournal(events: readonly MigrationEvent[]): CloudEvent[] {
  const out: CloudEvent[] = [];
  let state: MigrationState | null = null;
  for (const [index, event] of events.entries()) {
    const next: MigrationState =
      state === null
        ? start((event as Extract<MigrationEvent, { type: 'created' }>).spec).state
        : step(state, event).state;
    out.push(...notificationsOf(state, event, next, index + 1));
    state = next;
  }
  return out;
}
