import type { RouteInFlight } from './in-flight.js';

/** The answers of the router's control API, shared by the router and its client. */

export interface ReloadResult {
  /** The newest `updatedAt` in the table now live. */
  version: number;
  routes: number;
  /** Table entries left out and listeners that could not be opened; empty when all is served. */
  problems: string[];
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
  routes: Record<string, RouteSnapshot>;
  problems: string[];
}

export interface InFlightAnswer {
  route: string;
  addresses: string[];
  inFlight: number;
}
