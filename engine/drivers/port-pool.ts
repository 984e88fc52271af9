import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';

const loopback = '127.0.0.1';
/** How long a port handed out stays out of the next calls' choice. */
const portHoldMs = 60_000;
/** Enough tries to get past every port held, however many provisions ran lately. */
const maxPortTries = 10_000;

/**
 * Loopback ports for the replicas of one driver set, chosen below the kernel's ephemeral range
 * (listenerPorts) (defaultDrivers makes one and hands it to the
 * process and container drivers). It remembers the ports it handed out lately, with when each hold
 * ends: the kernel soon hands a closed port to the next bind(0) again (59 repeats in 1,000 calls
 * here), so without it two provisions running at once could pick the same port; a replica binds
 * its port within its start-up, long before the hold ends. Provisions that may run at the same
 * time must share one pool: a process hosting several migrations at once shares one driver set.
 */
export class PortPool {
  /** Port → when its hold ends (ms since the epoch). */
  private readonly handedOut = new Map<number, number>();
  /**
   * @param range where ports are chosen (default listenerPorts()); undefined: the kernel's choice
   *   (bind to port 0).
   */
  constructor(private readonly range: { low: number; high: number } | undefined = listenerPorts()) {}

  /**
   * Distinct free loopback ports, none handed out by this pool in the last minute: each is bound
   * (port 0) and held until all are chosen. Another process may still take one before the replica
   * binds it: the replica then exits at once, which fails the stage like any other start-up failure.
   * `reserved`: ports never chosen, free or not (the topology's routes listen there once they are
   * served: a replica on one of them would keep the router from binding it).
   */
  async take(count: number, reserved: ReadonlySet<number> = noPorts): Promise<number[]> {
    const now = Date.now();
    for (const [port, until] of this.handedOut) if (until <= now) this.handedOut.delete(port);
    const servers: Server[] = [];
    const chosen: number[] = [];
    try {
      for (let tries = 0; chosen.length < count; tries++) {
        if (tries >= maxPortTries) throw new Error(`no free loopback port after ${maxPortTries} tries`);
        const wanted = this.range ? randomPortIn(this.range) : 0;
        if (wanted !== 0 && (this.handedOut.has(wanted) || chosen.includes(wanted) || reserved.has(wanted)))
          continue;
        const server = createServer();
        const bound = await new Promise<boolean>((resolve, reject) => {
          server.once('error', (error: NodeJS.ErrnoException) =>
            wanted !== 0 && (error.code === 'EADDRINUSE' || error.code === 'EACCES')
              ? resolve(false)
              : reject(error),
          );
          server.listen(wanted, loopback, () => resolve(true));
        });
        if (!bound) continue;
        servers.push(server);
        const address = server.address();
        if (address === null || typeof address === 'string') throw new Error('no port for a TCP listener');
        // A port held for another provision stays bound until the end, so the kernel moves on.
        if (!this.handedOut.has(address.port) && !reserved.has(address.port)) chosen.push(address.port);
      }
      for (const port of chosen) this.handedOut.set(port, now + portHoldMs);
      return chosen;
    } finally {
      await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    }
  }
}

const noPorts: ReadonlySet<number> = new Set();

/**
 * The ports a listener is chosen from: the 12,000 below the kernel's ephemeral range
 * (net.ipv4.ip_local_port_range, 32768–60999 by default: 20768–32767), where no outgoing
 * connection takes its local port. A port chosen by bind(0) comes from the ephemeral range itself,
 * so between its choice and the replica's bind an outgoing connection of any process on the
 * machine could take it (seen: PostgreSQL "could not bind … Address already in use" on such a
 * port while other tests made connections). Undefined when that range leaves no room below it.
 */
export function listenerPorts(): { low: number; high: number } | undefined {
  let ephemeralLow = 32_768;
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    if (Number.isSafeInteger(Number(low))) ephemeralLow = Number(low);
  } catch {
    // not Linux, or no /proc: the default range
  }
  const high = ephemeralLow - 1;
  const low = Math.max(1_024, high - 11_999);
  return high - low >= 1_000 ? { low, high } : undefined;
}

function randomPortIn(range: { low: number; high: number }): number {
  return range.low + Math.floor(Math.random() * (range.high - range.low + 1));
}
