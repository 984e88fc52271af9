import { Agent, type ClientRequestArgs } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { parseHostPort } from './host-port.js';

/** Connections a router keeps open to one upstream address at most; more requests queue. */
export const upstreamMaxSockets = 256;
/** Idle keep-alive connections kept per upstream address. */
export const upstreamMaxFreeSockets = 64;
/**
 * An idle upstream connection is closed after this long: below Node's default server
 * keepAliveTimeout (5 s), so the router rarely reuses a socket the upstream is closing.
 */
export const upstreamIdleSocketTimeoutMs = 4_000;
/**
 * Connections kept ready to every blue address of the table, even while blue takes no traffic:
 * idle keep-alive connections, or else spare connections opened ahead (no request sent on them).
 * A rollback sends blue, which sat at 0% while green served, all of the traffic at once; without
 * them, its first requests would each wait for a new connection while the machine is busiest.
 * (Green needs none: the health gate reaches it before traffic moves, and after a rollback it goes.)
 */
export const upstreamWarmConnections = 4;
/** How often the pools are checked and topped up. */
export const upstreamWarmIntervalMs = 1_000;
/**
 * A spare connection is replaced after this long: servers close connections on which no request
 * came within a while (nginx after 60 s), and a spare must be gone from the pool before that.
 */
export const upstreamSpareMaxAgeMs = 20_000;

/** An upstream address, parsed once, and its connection pool. */
export interface Upstream {
  host: string | undefined;
  port: number | undefined;
  agent: WarmAgent;
}

interface Spare {
  socket: Socket;
  openedAt: number;
  drop: () => void;
}

/**
 * A keep-alive agent that can hold spare connections: connected sockets on which nothing was sent
 * yet. A request that finds no idle keep-alive connection takes a spare before a new connection is
 * opened. A spare is used like a reused keep-alive connection (the upstream may close it just as a
 * request goes out), so failover treats it as one: `wasSpare`.
 */
export class WarmAgent extends Agent {
  private spares: Spare[] = [];
  private opening = 0;
  private readonly handedOut = new WeakSet<object>();
  private readonly name: string;

  constructor(
    private readonly host: string | undefined,
    private readonly port: number | undefined,
  ) {
    super({
      keepAlive: true,
      maxSockets: upstreamMaxSockets,
      maxFreeSockets: upstreamMaxFreeSockets,
      timeout: upstreamIdleSocketTimeoutMs,
      scheduling: 'lifo',
    });
    this.name = this.getName({ host, port });
  }

  override createConnection(
    options: ClientRequestArgs,
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | null | undefined {
    for (let spare = this.spares.pop(); spare; spare = this.spares.pop()) {
      spare.drop();
      const { socket } = spare;
      if (socket.destroyed || !socket.writable || !socket.readable) {
        socket.destroy();
        continue;
      }
      this.handedOut.add(socket);
      return socket;
    }
    return super.createConnection(options, callback);
  }

  /** The socket came from the spares: a reset on it is no proof the upstream saw the request. */
  wasSpare(socket: object): boolean {
    return this.handedOut.has(socket);
  }

  /** Opens spares until `count` connections are ready (idle keep-alive or spare); renews old spares. */
  keepWarm(count: number, now = Date.now()): void {
    this.spares = this.spares.filter((spare) => {
      if (now - spare.openedAt < upstreamSpareMaxAgeMs) return true;
      spare.drop();
      spare.socket.destroy();
      return false;
    });
    const idle = this.freeSockets[this.name]?.length ?? 0;
    const busy = this.sockets[this.name]?.length ?? 0;
    // An address with requests on it warms itself; one without needs spares.
    if (busy > 0) return;
    for (let ready = idle + this.spares.length + this.opening; ready < count; ready++) this.openSpare();
  }

  override destroy(): void {
    for (const spare of this.spares.splice(0)) {
      spare.drop();
      spare.socket.destroy();
    }
    super.destroy();
  }

  private openSpare(): void {
    if (this.host === undefined || this.port === undefined) return;
    this.opening++;
    const socket = connect({ host: this.host, port: this.port, noDelay: true, keepAlive: true });
    socket.unref();
    let state: 'opening' | 'spare' | 'gone' = 'opening';
    let spare: Spare | null = null;
    const listeners = ['error', 'close', 'end', 'data'] as const;
    // Anything but a clean idle connection (an error, a close, bytes nobody asked for) ends a spare.
    const remove = (): void => {
      if (state === 'opening') this.opening--;
      else if (state === 'spare') this.spares = this.spares.filter((s) => s !== spare);
      state = 'gone';
      for (const event of listeners) socket.off(event, remove);
      socket.destroy();
    };
    for (const event of listeners) socket.on(event, remove);
    socket.once('connect', () => {
      if (state !== 'opening') return;
      this.opening--;
      state = 'spare';
      spare = {
        socket,
        openedAt: Date.now(),
        drop: () => {
          // Handed out or renewed: no longer a spare, and its events are its new owner's.
          state = 'gone';
          for (const event of listeners) socket.off(event, remove);
        },
      };
      this.spares.push(spare);
    });
  }
}

/** One keep-alive agent per upstream address, so each upstream has its own connection pool. */
export class UpstreamAgents {
  private readonly agents = new Map<string, Upstream>();
  private warmTimer: NodeJS.Timeout | null = null;
  private warmAddresses: ReadonlySet<string> = new Set();

  get(address: string): Upstream {
    let upstream = this.agents.get(address);
    if (!upstream) {
      const target = parseHostPort(address);
      upstream = { host: target?.host, port: target?.port, agent: new WarmAgent(target?.host, target?.port) };
      this.agents.set(address, upstream);
    }
    return upstream;
  }

  /**
   * Keeps `upstreamWarmConnections` connections ready to every address of `addresses`, topped up
   * every `upstreamWarmIntervalMs` (not at once: a new table is the moment traffic moves, no time to
   * open connections nobody asked for yet). Each table replaces the set.
   */
  keepWarm(addresses: ReadonlySet<string>): void {
    this.warmAddresses = addresses;
    if (this.warmTimer) return;
    this.warmTimer = setInterval(() => {
      for (const address of this.warmAddresses) this.get(address).agent.keepWarm(upstreamWarmConnections);
    }, upstreamWarmIntervalMs);
    this.warmTimer.unref();
  }

  /** Drops pools of addresses no route uses any more, once nothing is in flight to them. */
  sweep(inUse: ReadonlySet<string>, inFlightTo: (address: string) => number): void {
    for (const [address, { agent }] of this.agents) {
      if (inUse.has(address) || inFlightTo(address) > 0) continue;
      agent.destroy();
      this.agents.delete(address);
    }
  }

  destroyAll(): void {
    if (this.warmTimer) clearInterval(this.warmTimer);
    this.warmTimer = null;
    this.warmAddresses = new Set();
    for (const { agent } of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}
