import { shownUrl } from '../topology/hook-types.js';
import { sensitiveText } from '../topology/secret-refs.js';
import type { NotifyTarget, Topology } from '../topology/types.js';

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
    to: target.type === 'command' ? target.command.join(' ') : shownNotifyUrl(target),
    severity: target.severity,
    ...(target.events === undefined ? {} : { events: [...target.events] }),
  }));
}

/**
 * Where a URL target's events go, as a plan, a log and a delivery record name it: never a
 * credential. A secret reference is `(sensitive)`; a written URL loses its user info and query
 * (as a hook's does), and a Slack URL shows only its host, since its path is the token.
 */
export function shownNotifyUrl(target: Exclude<NotifyTarget, { type: 'command' }>): string {
  if (typeof target.url !== 'string') return sensitiveText;
  if (target.type !== 'slack') return shownUrl(target.url);
  try {
    const url = new URL(target.url);
    return `${url.protocol}//${url.host}/…`;
  } catch {
    return sensitiveText; // not a URL: nothing is known to be safe to show
  }
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
