import { createServer, type Server } from 'node:net';

const loopback = '127.0.0.1';
/** How long a port handed out stays out of the next calls' choice. */
const portHoldMs = 60_000;
/** Enough tries to get past every port held, however many provisions ran lately. */
const maxPortTries = 10_000;

/**
 * Loopback ports for the replicas of one driver set (defaultDrivers makes one and hands it to the
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
   * Distinct free loopback ports, none handed out by this pool in the last minute: each is bound
   * (port 0) and held until all are chosen. Another process may still take one before the replica
   * binds it: the replica then exits at once, which fails the stage like any other start-up failure.
   */
  async take(count: number): Promise<number[]> {
    const now = Date.now();
    for (const [port, until] of this.handedOut) if (until <= now) this.handedOut.delete(port);
    const servers: Server[] = [];
    const chosen: number[] = [];
    try {
      for (let tries = 0; chosen.length < count; tries++) {
        if (tries >= maxPortTries) throw new Error(`no free loopback port after ${maxPortTries} tries`);
        const server = createServer();
        servers.push(server);
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(0, loopback, resolve);
        });
        const address = server.address();
        if (address === null || typeof address === 'string') throw new Error('no port for a TCP listener');
        // A port held for another provision stays bound until the end, so the kernel moves on.
        if (!this.handedOut.has(address.port)) chosen.push(address.port);
      }
      for (const port of chosen) this.handedOut.set(port, now + portHoldMs);
      return chosen;
    } finally {
      await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    }
  }
}
