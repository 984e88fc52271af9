import type { Slot } from './routing-state.js';

/** Requests of one route whose response has not finished, per slot and per upstream address. */
export interface RouteInFlight {
  blue: number;
  green: number;
  byAddress: Record<string, number>;
}

/** One request's claim on an upstream; it moves when the request fails over, and ends once. */
export interface Lease {
  move(slot: Slot, address: string): void;
  release(): void;
}

/**
 * In-flight accounting, kept apart from the routing state so it survives table reloads: a request
 * that began on blue is still counted on blue after the switch, which is how drain knows when blue
 * is empty. Counts are keyed by the slot a request was sent to, not the slot an address holds now.
 */
export class InFlightRegistry {
  private readonly routes = new Map<string, Map<string, Record<Slot, number>>>();

  begin(routeKey: string, slot: Slot, address: string): Lease {
    this.add(routeKey, slot, address, 1);
    return new RegistryLease(this, routeKey, slot, address);
  }

  /** @internal The lease's way in: counts `delta` requests on one slot and address of a route. */
  add(routeKey: string, slot: Slot, address: string, delta: number): void {
    let byAddress = this.routes.get(routeKey);
    if (!byAddress) {
      byAddress = new Map();
      this.routes.set(routeKey, byAddress);
    }
    let counts = byAddress.get(address);
    if (!counts) {
      counts = { blue: 0, green: 0 };
      byAddress.set(address, counts);
    }
    counts[slot] += delta;
    // Only requests in flight are kept: the maps stay as small as the live traffic.
    if (counts.blue === 0 && counts.green === 0) byAddress.delete(address);
    if (byAddress.size === 0) this.routes.delete(routeKey);
  }

  route(routeKey: string): RouteInFlight {
    const result: RouteInFlight = { blue: 0, green: 0, byAddress: {} };
    for (const [address, counts] of this.routes.get(routeKey) ?? []) {
      result.blue += counts.blue;
      result.green += counts.green;
      result.byAddress[address] = counts.blue + counts.green;
    }
    return result;
  }

  /** Requests of a route in flight to any of `addresses`, whichever slot they were sent as. */
  count(routeKey: string, addresses: readonly string[]): number {
    const byAddress = this.routes.get(routeKey);
    let total = 0;
    for (const address of new Set(addresses)) {
      const counts = byAddress?.get(address);
      if (counts) total += counts.blue + counts.green;
    }
    return total;
  }

  /** Requests in flight to an address over all routes. */
  toAddress(address: string): number {
    let total = 0;
    for (const byAddress of this.routes.values()) {
      const counts = byAddress.get(address);
      if (counts) total += counts.blue + counts.green;
    }
    return total;
  }
}

/** A class rather than closures: one small object per request on the proxy's hot path. */
class RegistryLease implements Lease {
  private live = true;

  constructor(
    private readonly registry: InFlightRegistry,
    private readonly routeKey: string,
    private slot: Slot,
    private address: string,
  ) {}

  move(slot: Slot, address: string): void {
    if (!this.live) return;
    this.registry.add(this.routeKey, this.slot, this.address, -1);
    this.slot = slot;
    this.address = address;
    this.registry.add(this.routeKey, slot, address, 1);
  }

  release(): void {
    if (!this.live) return;
    this.live = false;
    this.registry.add(this.routeKey, this.slot, this.address, -1);
  }
}
