import { sensitiveText } from '../topology/secret-refs.js';
import type { NotifyTarget, NotifyUrl, Topology } from '../topology/types.js';

/**
 * A notification target as a plan shows it to reviewers: where events go and which, never a secret
 * (a URL given as a secret reference shows as `(sensitive)`; the signing key never shows).
 */
export interface PlanNotifyTarget {
  name: string;
  type: NotifyTarget['type'];
  /** The URL, `(sensitive)`, or the command's argv joined by spaces. */
  to: string;
  severity: NotifyTarget['severity'];
  /** Only these events; absent: all of its severity. */
  events?: string[];
}

export function planNotifyTargets(notify: NonNullable<Topology['notify']>): PlanNotifyTarget[] {
  return Object.entries(notify).map(([name, target]) => ({
    name,
    type: target.type,
    to: target.type === 'command' ? target.command.join(' ') : shownUrl(target.url),
    severity: target.severity,
    ...(target.events === undefined ? {} : { events: [...target.events] }),
  }));
}

function shownUrl(url: NotifyUrl): string {
  return typeof url === 'string' ? url : sensitiveText;
}

/** For reviewers: `ops (webhook http://…, warning and up: failed), page (command ./page.sh)`. */
export function describeNotifyTargets(targets: readonly PlanNotifyTarget[]): string {
  return targets
    .map((t) => {
      const level = t.severity === 'info' ? '' : `, ${t.severity} and up`;
      const which = t.events ? `: ${t.events.join(', ')}` : '';
      return `${t.name} (${t.type} ${t.to}${level}${which})`;
    })
    .join(', ');
}
