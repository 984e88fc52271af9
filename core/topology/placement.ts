/**
 * Placement of container components on a driver's `hosts` (pure). The rule, in full: a host
 * matches when its labels include every `placement.labels` pair of the component (no labels: every
 * host matches); the component runs on the first match in host-name order. One host per
 * component: its replicas are not spread, and a change of labels that moves it is a replacement
 * (green on the new host, blue retired where it ran).
 */
import type { ContainerHost } from './types.js';

/** Names of the hosts whose labels include all of `wanted`, in name order. */
export function hostsMatching(
  hosts: Record<string, ContainerHost>,
  wanted: Record<string, string>,
): string[] {
  return Object.keys(hosts)
    .sort()
    .filter((name) => {
      const labels = hosts[name]?.labels ?? {};
      return Object.entries(wanted).every(
        ([key, value]) => Object.hasOwn(labels, key) && labels[key] === value,
      );
    });
}

/** `a {zone: a}, b {zone: b}`: the hosts and their labels, for messages. */
export function describeHosts(hosts: Record<string, ContainerHost>): string {
  return Object.keys(hosts)
    .sort()
    .map((name) => {
      const labels = Object.entries(hosts[name]?.labels ?? {})
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, v]) => `${k}: ${v}`);
      return `${name} {${labels.join(', ')}}`;
    })
    .join(', ');
}
