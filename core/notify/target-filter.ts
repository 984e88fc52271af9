import type { NotifyTarget } from '../topology/types.js';
import { eventSeverity } from './migration-events.js';
import { type CloudEvent, severityAtLeast } from './types.js';

/**
 * Whether a target wants an event: its severity is at least the target's `severity`, and its name
 * is among the target's `events` when it lists some. Pure, so a Temporal workflow filters before it
 * schedules a delivery (engine/notify/notifier.ts applies the same rule beside the local runner).
 */
export function targetWants(target: NotifyTarget, event: CloudEvent): boolean {
  const name = event.data.event;
  if (!severityAtLeast(eventSeverity[name], target.severity)) return false;
  return target.events === undefined || target.events.includes(name);
}
