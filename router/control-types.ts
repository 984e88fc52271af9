import type { RouteCertificatesInfo } from '../core/certificate-expiry.js';
import type { RouteInFlight } from './in-flight.js';

export type { RouteCertificatesInfo, ServedCertificateInfo } from '../core/certificate-expiry.js';

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
  /**
   * Route key → id of the write hold in effect once this table is live, so that the engine knows
   * its hold (or release) took. (Absent from a router older than write holds: it holds nothing.)
   */
  holds?: Record<string, string>;
}

/** Open upgraded connections of a route, by the slot their handshake went to. */
export interface RouteUpgraded {
  blue: number;
  green: number;
}

/** A route's listener the router could not open at the last reload. */
export interface ListenFailure {
  /** `<environment>/<route>`. */
  routeKey: string;
  kind: 'main' | 'preview' | 'redirect';
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
  /** Upgraded connections (WebSockets) open now, by the slot their handshake went to (absent from an older router). */
  upgraded?: RouteUpgraded;
  /** The write hold in effect on the route (router/write-holds.ts). */
  hold?: ControlHold;
  /** The last write hold that ended on the route since the router started. */
  lastHold?: FinishedHold;
  /**
   * A TLS route's certificates served now (names, file, notAfter, fingerprint), when they were
   * loaded, and the last load's problem while the files on disk cannot be loaded (absent: a plain
   * route, or an older router).
   */
  tls?: RouteCertificatesInfo;
}

/** A write hold in effect: `held` requests wait now. */
export interface ControlHold {
  id: string;
  /** When the engine started it (epoch ms). */
  since: number;
  held: number;
  expiresAt: number;
  maxHeld: number;
  /** Requests answered 503 because `maxHeld` were held (or, in a pause, waited its `timeoutMs`). */
  refused: number;
  /** An operator's pause (`cutover proxy pause`) rather than a stateful switch's write hold. */
  pause?: PauseSpec;
}

/** An operator's pause of a route (router/write-holds.ts): new requests wait, in order, within these bounds. */
export interface PauseSpec {
  /** When it began (epoch ms). */
  since: number;
  /** Longest a request waits; then 503 with Retry-After. */
  timeoutMs: number;
  /** Most requests waiting at once; the next ones get 503 with Retry-After. */
  maxHeld: number;
}

/**
 * Where a hold's requests went: all to green, all to blue, split by the weights, or nowhere (the
 * route left the table, the router stopped: they were answered 503).
 */
export type ReleasedTo = 'green' | 'blue' | 'weights' | 'none';

/**
 * What ended a hold: a table without it (`released`) or with another hold (`replaced`), its
 * `expiresAt` (`expired`: the engine did not release it in time), the route leaving the table, or
 * the router stopping.
 */
export type HoldEnd = 'released' | 'replaced' | 'expired' | 'removed' | 'router-stopped' | 'resumed';

export interface FinishedHold {
  id: string;
  /** Requests it held (those whose client left while held included). */
  heldCount: number;
  /** How long this router held, from the table that started it to the one (or the bound) that ended it. */
  durationMs: number;
  releasedTo: ReleasedTo;
  ended: HoldEnd;
  /** An operator's pause (absent: a write hold). */
  kind?: 'pause';
  refused: number;
  /** Held requests whose client went away before the release (nothing went upstream for them). */
  left: number;
  /** Epoch ms. */
  endedAt: number;
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
  /** Upgraded connections open to those addresses (absent from an older router). */
  upgraded?: number;
}

/** `POST /close-upgraded`: how many upgraded connections the router closed. */
export interface CloseUpgradedAnswer {
  route: string;
  addresses: string[];
  closed: number;
}
