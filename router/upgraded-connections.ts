import type { Socket } from 'node:net';
import type { RouteUpgraded } from './control-types.js';
import { escapeLabel, splitKey } from './metrics-text.js';
import { type Slot, slots } from './routing-state.js';
import type { UpgradeTunnel } from './upgrade-tunnel.js';

/** A route's upgraded connections since the router started (or the route entered the table). */
export interface RouteUpgradeMetrics {
  route: string;
  open: Record<Slot, number>;
  /** Upgrades that went through (the upstream answered 101). */
  total: Record<Slot, number>;
  /** Those the router closed itself (1001 for a WebSocket): a drain's end, their listener gone. */
  closedByRouter: Record<Slot, number>;
}

interface Counters {
  total: Record<Slot, number>;
  closedByRouter: Record<Slot, number>;
}

/**
 * Every open upgraded connection of the router (upgrade-tunnel.ts), for `/routes`, `/in-flight`,
 * `/metrics` and the drain: an upgraded connection stays on the upstream of its handshake, so a
 * drain of that upstream waits for it, then closes it (`close`).
 *
 * Invariant: a tunnel is here from its 101 until both its sockets are closed, counted on the slot
 * and address its handshake went to.
 */
export class UpgradedConnections {
  private readonly tunnels = new Set<UpgradeTunnel>();
  private readonly counters = new Map<string, Counters>();

  add(tunnel: UpgradeTunnel): void {
    this.tunnels.add(tunnel);
    this.countersOf(tunnel.routeKey).total[tunnel.slot]++;
    void tunnel.ended.then(() => {
      this.tunnels.delete(tunnel);
      const counters = this.counters.get(tunnel.routeKey);
      if (counters && tunnel.endedBy === 'router') counters.closedByRouter[tunnel.slot]++;
    });
  }

  route(routeKey: string): RouteUpgraded {
    const open: RouteUpgraded = { blue: 0, green: 0 };
    for (const tunnel of this.tunnels) if (tunnel.routeKey === routeKey) open[tunnel.slot]++;
    return open;
  }

  /** Open upgraded connections of a route to any of `addresses`. */
  count(routeKey: string, addresses: readonly string[]): number {
    return this.matching(routeKey, addresses).length;
  }

  /**
   * Closes the route's upgraded connections to `addresses` cleanly (UpgradeTunnel.close); resolves
   * with how many were open once all are closed (cut after `graceMs`).
   */
  async close(routeKey: string, addresses: readonly string[], graceMs: number): Promise<number> {
    const closing = this.matching(routeKey, addresses);
    await Promise.all(closing.map((tunnel) => tunnel.close(graceMs, 'drain')));
    return closing.length;
  }

  /**
   * The listener `clients` came through goes away (its route left the table or moved, the router
   * stops): their tunnels are closed as a drain closes them (cut after `graceMs`); a handshake not
   * answered yet is cut, as the listener's idle connections are.
   */
  async closeClients(clients: readonly Socket[], graceMs: number): Promise<void> {
    const byClient = new Map([...this.tunnels].map((tunnel) => [tunnel.client, tunnel]));
    const closing: Promise<void>[] = [];
    for (const socket of clients) {
      const tunnel = byClient.get(socket);
      if (tunnel) closing.push(tunnel.close(graceMs, 'listener'));
      else socket.destroy();
    }
    await Promise.all(closing);
  }

  keepRoutes(routeKeys: Iterable<string>): void {
    const keep = new Set(routeKeys);
    for (const key of this.counters.keys()) if (!keep.has(key)) this.counters.delete(key);
    for (const key of keep) this.countersOf(key);
  }

  metrics(): RouteUpgradeMetrics[] {
    return [...this.counters.keys()].sort().map((route) => {
      const c = this.countersOf(route);
      return {
        route,
        open: this.route(route),
        total: { ...c.total },
        closedByRouter: { ...c.closedByRouter },
      };
    });
  }

  private matching(routeKey: string, addresses: readonly string[]): UpgradeTunnel[] {
    const wanted = new Set(addresses);
    return [...this.tunnels].filter((t) => t.routeKey === routeKey && wanted.has(t.address));
  }

  private countersOf(key: string): Counters {
    let counters = this.counters.get(key);
    if (!counters) {
      counters = { total: { blue: 0, green: 0 }, closedByRouter: { blue: 0, green: 0 } };
      this.counters.set(key, counters);
    }
    return counters;
  }
}

/**
 * `cutover_route_upgraded_connections` (gauge), `cutover_route_upgrades_total` and
 * `cutover_route_upgraded_closed_total` (counters), labelled `{environment, route, slot}`, in
 * Prometheus's text format.
 */
export function upgradeMetricsText(routes: readonly RouteUpgradeMetrics[]): string {
  const lines: string[] = [];
  const metric = (
    name: string,
    type: string,
    help: string,
    value: (r: RouteUpgradeMetrics, s: Slot) => number,
  ) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const route of routes) {
      const [environment, name_] = splitKey(route.route);
      for (const slot of slots)
        lines.push(
          `${name}{environment="${escapeLabel(environment)}",route="${escapeLabel(name_)}",slot="${slot}"} ${value(route, slot)}`,
        );
    }
  };
  metric(
    'cutover_route_upgraded_connections',
    'gauge',
    'Upgraded connections (WebSockets) open now, per route and the slot their handshake went to.',
    (r, s) => r.open[s],
  );
  metric(
    'cutover_route_upgrades_total',
    'counter',
    'Upgrades the upstream accepted (101), per route and slot.',
    (r, s) => r.total[s],
  );
  metric(
    'cutover_route_upgraded_closed_total',
    'counter',
    'Upgraded connections the router closed itself (1001 for a WebSocket) at the end of a drain or as their listener closed.',
    (r, s) => r.closedByRouter[s],
  );
  return `${lines.join('\n')}\n`;
}
