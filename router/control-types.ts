import type { RouteInFlight } from './in-flight.js';

/** The answers of the router's control API, shared by the router and its client. */

export interface ReloadResult {
  /** The newest `updatedAt` in the table now live. */
  version: number;
  /**
   * How many different tables the router has applied since it started: one table write that
   * changes several routes is one generation, so every route's change went live at once. (Absent
   * from an older router.)
   */
  generation?: number;
  routes: number;
  /** Table entries left out and listeners that could not be opened; empty when all is served. */
  problems: string[];
  /**
   * The listeners of `problems` that could not be opened, by route, so that the step that asked
   * for a route fails when its own address cannot be served. (Absent from an older router.)
   */
  unbound?: ListenFailure[];
}

/** A route's listener the router could not open at the last reload. */
export interface ListenFailure {
  /** `<environment>/<route>`. */
  routeKey: string;
  kind: 'main' | 'preview';
  address: string;
  /** What went wrong and what to do, e.g. "the address is already in use (EADDRINUSE); stop …". */
  cause: string;
  /** Not failed (yet): the router is opening it right now. */
  opening?: boolean;
}

export interface RouteSnapshot {
  listen: string;
  preview?: string;
  greenPercent: number;
  blue: string[];
  green: string[];
  inFlight: RouteInFlight;
}

export interface RoutesSnapshot {
  version: number;
  /** As in ReloadResult: the generation of the routing state these routes were read from. */
  generation?: number;
  routes: Record<string, RouteSnapshot>;
  problems: string[];
  /** Listeners of the table the router does not hold now (another program has the address). */
  unbound?: ListenFailure[];
}

export interface InFlightAnswer {
  route: string;
  addresses: string[];
  inFlight: number;
}
