/**
 * Notifications: what a migration tells the outside world as it goes (a webhook, a chat, a
 * command, the server's event stream). Derived from the migration's events, never journaled, and
 * never able to change what the migration does.
 */

/** Least to most severe; a target's `severity` filter is the least it wants. */
export const severities = ['info', 'warning', 'error'] as const;
export type Severity = (typeof severities)[number];

export const notifyEventNames = [
  'started',
  'step_reached',
  'analysis_failed',
  'rolled_back',
  'cancelled',
  'awaiting_commit',
  'awaiting_promotion',
  'completed',
  'failed',
  'write_hold_started',
  'write_hold_ended',
  'replication_lagging',
  'replication_caught_up',
] as const;
export type NotifyEventName = (typeof notifyEventNames)[number];

/** The events of a stateful switch (core/notify/switch-events.ts). */
export const switchEventNames: readonly NotifyEventName[] = [
  'write_hold_started',
  'write_hold_ended',
  'replication_lagging',
  'replication_caught_up',
];

/** The CloudEvents `type` prefix: `dev.cutover.migration.completed`. */
export const cloudEventTypePrefix = 'dev.cutover.migration.';

/** What every event carries in `data`, plus the fields of its kind. */
export interface NotificationData {
  environment: string;
  migration: string;
  /** The event's name (`completed`), as the `type` ends. */
  event: NotifyEventName;
  severity: Severity;
  /** One sentence for people: what a chat shows. */
  message: string;
  planId: string;
  /** The layout serial the migration started from, and the one it committed (once committed). */
  baseSerial: number;
  serial?: number;
  /** Version of each component the plan changes: before (blue) → after (green). */
  versions: Record<string, { from: string | null; to: string | null }>;
  /** step_reached: the route and its share of traffic on green, in percent. */
  route?: string;
  weight?: number;
  /** rolled_back, cancelled, failed, analysis_failed: why. */
  reason?: string;
  /** analysis_failed (from the analysis of a step, when it lands): the check and its figures. */
  analysis?: AnalysisFailure;
  /** write_hold_started, write_hold_ended: the hold of a stateful switch (see WriteHoldDetail). */
  hold?: WriteHoldDetail;
  /** replication_lagging, replication_caught_up: the switched component and its lag. */
  component?: string;
  lag?: { lagMs: number | null; lagBytes: number | null; maxLagMs: number };
}

/** What one event adds to the common data. */
export interface EventDetail {
  message: string;
  /** A traffic step: the route, when one moved (a 1.0/1.1 plan moves one route per command). */
  route?: string;
  /** A traffic step: every route that moved together (plan format 1.2 moves them in one step). */
  routes?: string[];
  weight?: number;
  reason?: string;
  analysis?: AnalysisFailure;
  serial?: number;
  hold?: WriteHoldDetail;
  component?: string;
  lag?: NotificationData['lag'];
}

/** A write hold of the switch of stateful components (issue 28), as its notifications tell it. */
export interface WriteHoldDetail {
  routes: string[];
  /** The side the writes leave: blue for the switch to green, green for the way back. */
  from?: 'blue' | 'green';
  budgetMs?: number;
  maxHeld?: number;
  /** write_hold_ended: where the held requests went, how long they were held (ms), and how many (when the router told). */
  releasedTo?: 'blue' | 'green';
  durationMs?: number;
  heldCount?: number;
}

/**
 * The payload of `analysis_failed`, the hook left for the step analysis: which check breached at
 * which step, with the figures that breached it.
 */
export interface AnalysisFailure {
  check: string;
  route?: string;
  weight?: number;
  /** The measured value and the bound it broke, e.g. 4.2 and 1 (percent of 5xx). */
  value?: number;
  bound?: number;
  requests?: number;
}

/** A CloudEvents 1.0 event in its JSON form (structured mode). */
export interface CloudEvent {
  specversion: '1.0';
  /** `<migration id>.<journal sequence>.<index>`: the same event always has the same id. */
  id: string;
  /** `cutover/<environment>`. */
  source: string;
  /** `dev.cutover.migration.<event>`. */
  type: string;
  /** The migration id. */
  subject: string;
  /** RFC 3339, the time of the journaled event that caused it. */
  time: string;
  datacontenttype: 'application/json';
  data: NotificationData;
}

export function severityAtLeast(severity: Severity, least: Severity): boolean {
  return severities.indexOf(severity) >= severities.indexOf(least);
}
