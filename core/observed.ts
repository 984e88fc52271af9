import type { Slot } from './layout.js';

/**
 * What actually runs in an environment, as its drivers report it: the world, beside the record
 * (`CurrentLayout`). Plans diff the record and this together, so a dead replica, a route nobody
 * serves or an edited nginx file shows as drift. Plain data: it travels in plans' inputs, the
 * status view and API answers. Times are ISO 8601.
 */
export interface ObservedLayout {
  environment: string;
  /** When the drivers were asked (ISO 8601). */
  observedAt: string;
  /** By component name: the live (blue) slot of every component in the record. */
  components: Record<string, ObservedComponent>;
  /** By route name: every route in the record. */
  routes: Record<string, ObservedRoute>;
}

/**
 * `running`: the process is alive and its port answers (or the driver cannot tell more);
 * `not_running`: gone; `not_answering`: alive, but its address refuses connections;
 * `unknown`: the driver cannot observe it (an exec driver without an `observe` command).
 */
export type ReplicaState = 'running' | 'not_running' | 'not_answering' | 'unknown';

export interface ObservedReplica {
  /** host:port, when the component serves traffic. */
  address: string | null;
  /** The process, where the driver knows one. */
  pid?: number;
  state: ReplicaState;
  /** Why, in a few words ("exited", "connection refused"). */
  detail?: string;
}

export interface ObservedComponent {
  component: string;
  slot: Slot;
  version: string;
  replicas: ObservedReplica[];
}

/**
 * `served`: the route answers as recorded; `not_served`: nothing serves it (the router is gone, or
 * the route is missing from what it serves); `address_taken`: its listen address is held by another
 * program; `edited`: the file or live configuration that realises it is not the one cutover wrote (nginx, caddy); `unknown`: the
 * driver cannot tell.
 */
export type RouteServingState = 'served' | 'not_served' | 'address_taken' | 'edited' | 'unknown';

export interface ObservedRoute {
  route: string;
  listen: string;
  state: RouteServingState;
  /** Percent of traffic on green, as the traffic layer serves it now, when it can tell. */
  greenPercent?: number;
  /** The addresses it sends traffic to, as served. */
  blue?: string[];
  green?: string[];
  /** Requests in flight now, when the traffic layer counts them (the built-in router). */
  inFlight?: number;
  /**
   * `edited` only: what was changed by hand, as drift names it ("haproxy server 127.0.0.1:4001
   * disabled by hand"). Stable: no counts or times, so two looks at the same edit plan alike.
   * Absent: "nginx file edited".
   */
  edit?: string;
  detail?: string;
}
