import { Agent } from 'node:http';

/** Connections a router keeps open to one upstream address at most; more requests queue. */
export const upstreamMaxSockets = 256;
/** Idle keep-alive connections kept per upstream address. */
export const upstreamMaxFreeSockets = 64;
/**
 * An idle upstream connection is closed after this long: below Node's default server
 * keepAliveTimeout (5 s), so the router rarely reuses a socket the upstream is closing.
 */
export const upstreamIdleSocketTimeoutMs = 4_000;

/** One keep-alive agent per upstream address, so each upstream has its own connection pool. */
export class UpstreamAgents {
  private readonly agents = new Map<string, Agent>();

  get(address: string): Agent {
    let agent = this.agents.get(address);
    if (!agent) {
      agent = new Agent({
        keepAlive: true,
        maxSockets: upstreamMaxSockets,
        maxFreeSockets: upstreamMaxFreeSockets,
        timeout: upstreamIdleSocketTimeoutMs,
        scheduling: 'lifo',
      });
      this.agents.set(address, agent);
    }
    return agent;
  }

  /** Drops pools of addresses no route uses any more, once nothing is in flight to them. */
  sweep(inUse: ReadonlySet<string>, inFlightTo: (address: string) => number): void {
    for (const [address, agent] of this.agents) {
      if (inUse.has(address) || inFlightTo(address) > 0) continue;
      agent.destroy();
      this.agents.delete(address);
    }
  }

  destroyAll(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}
