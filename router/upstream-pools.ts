import { UpstreamPool, upstreamMaintenanceIntervalMs, upstreamWarmConnections } from './upstream-pool.js';

/** One pool per upstream address, and the timer that keeps them tidy. */
export class UpstreamPools {
  private readonly pools = new Map<string, UpstreamPool>();
  private timer: NodeJS.Timeout | null = null;
  private warmAddresses: ReadonlySet<string> = new Set();

  get(address: string): UpstreamPool {
    let pool = this.pools.get(address);
    if (!pool) {
      pool = new UpstreamPool(address);
      this.pools.set(address, pool);
      this.startTimer();
    }
    return pool;
  }

  /**
   * Keeps `upstreamWarmConnections` connections ready to every address of `addresses`, topped up at
   * the next maintenance tick (not at once: a new table is the moment traffic moves, no time to open
   * connections nobody asked for yet). Each table replaces the set.
   */
  keepWarm(addresses: ReadonlySet<string>): void {
    this.warmAddresses = addresses;
    this.startTimer();
  }

  /** Drops pools of addresses no route uses any more, once nothing is in flight to them. */
  sweep(inUse: ReadonlySet<string>, inFlightTo: (address: string) => number): void {
    for (const [address, pool] of this.pools) {
      if (inUse.has(address) || inFlightTo(address) > 0) continue;
      pool.destroy();
      this.pools.delete(address);
    }
  }

  destroyAll(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.warmAddresses = new Set();
    for (const pool of this.pools.values()) pool.destroy();
    this.pools.clear();
  }

  private startTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.maintain(), upstreamMaintenanceIntervalMs);
    this.timer.unref();
  }

  private maintain(): void {
    const now = Date.now();
    for (const pool of this.pools.values()) pool.closeStale(now);
    for (const address of this.warmAddresses) this.get(address).keepWarm(upstreamWarmConnections);
  }
}
