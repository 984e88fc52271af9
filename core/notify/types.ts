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
] as const;
export type NotifyEventName = (typeof notifyEventNames)[number];

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
