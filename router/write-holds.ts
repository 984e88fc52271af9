import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { WriteHold } from '../core/layout.js';
import type { ControlHold, FinishedHold, HoldEnd, PauseSpec, ReleasedTo } from './control-types.js';
import { type ProxyListener, queueFullRetryAfterSeconds, refuseRequest } from './proxy-request.js';
import { refuseUpgrade } from './refusals.js';
import type { Binding, RouteState, RoutingState } from './routing-state.js';

/**
 * The router's request holds. A write hold (issue 28; RoutingEntry.hold in route-table.ts is the
 * contract): while a route's entry has a hold, its new requests wait here, unread, instead of going
 * upstream; when a table without that hold is applied, or the hold's `expiresAt` passes, they are
 * forwarded by the weights then live. A pause (an operator's maintenance, `cutover proxy pause`,
 * issue 31) is the same hold started and ended through the control API instead of the table: its
 * requests wait in order, each at most the pause's `timeoutMs` (then 503 with Retry-After), and go
 * by the weights live at the resume. A route has one hold at a time: a pause is refused while a
 * write hold is in effect, and a write hold is not taken on a paused route (the reload says why).
 * Pauses are kept in `router/pauses.json`, so a router started again is still paused.
 * An upgrade's handshake (a WebSocket's) waits in the same queue as a request, in the order it came,
 * within the same count and time, and goes on to the slot the release sends it to: a client that
 * reconnects during a switch is not refused. Its refusals are written on its socket, as HTTP.
 *
 * Invariants:
 * - A request is held at most once, and leaves the queue exactly once: forwarded, answered by the
 *   router (overflow, route gone, router stopping), or dropped because its client went away (then
 *   nothing goes upstream for it). A client's leaving shows while it is held only if the socket is
 *   still read: a body larger than its buffers (tens of KiB) pauses it, and is read at the release.
 *   A held upgrade's socket is paused, but Node still reads it into the stream's buffer (up to its
 *   highWaterMark, 16 KiB on Node 20): a client that leaves shows at once unless bytes it sent after
 *   its handshake wait unread there (a WebSocket client sends nothing before its answer).
 * - A held request is not in flight to any slot (in-flight.ts): the engine's drain of blue waits only
 *   for requests that reached blue before the hold.
 * - A hold whose id expired is never held again, whatever tables follow: the router's bound holds
 *   even when the engine that set it died.
 * - Releasing is synchronous: once the table that ends a hold is applied (and `POST /reload`
 *   answered), every held request has been handed to its upstream's pool.
 */
export type HeldRequest = HeldExchange | HeldUpgrade;

/** A request answered through its response. */
export interface HeldExchange {
  readonly binding: Binding;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly client: ProxyListener;
  /** performance.now() when it came: its duration, held time included, counts from then. */
  readonly arrivedMs: number;
  readonly socket?: undefined;
}

/** An upgrade's handshake: the socket is the router's (http1-connection.ts no longer reads it). */
export interface HeldUpgrade {
  readonly binding: Binding;
  readonly req: IncomingMessage;
  readonly socket: Socket;
  /** What the client sent after the handshake (the rest waits in the paused socket). */
  readonly head: Buffer;
  readonly arrivedMs: number;
  readonly res?: undefined;
}

export interface WriteHoldsDeps {
  /** The route as the table live now has it. */
  currentRoute(routeKey: string): RouteState | undefined;
  /** Sends a released request on by the table live now. */
  forward(held: HeldRequest): void;
  log(line: string): void;
  /** Keeps the pauses asked for, for the next router (router/pauses.ts). */
  savePauses(pauses: ReadonlyMap<string, PauseSpec>): void;
}

/** Retry-After of a 503 for a request a pause held too long, or could not hold: maintenance takes a while. */
export const pauseRetryAfterSeconds = 5;

/** Hold durations' histogram bounds, in ms (Prometheus `le` in seconds): the budget is ~2 s. */
export const holdDurationBoundsMs: readonly number[] = [
  5, 10, 25, 50, 100, 250, 500, 1_000, 2_000, 5_000, 10_000, 30_000,
];

/** A route's holds since the router started (or the route entered the table), for /metrics. */
export interface RouteHoldMetrics {
  route: string;
  /** Requests held now. */
  held: number;
  /** Holds started. */
  holds: number;
  /** Requests held, over every hold. */
  heldTotal: number;
  /** Requests answered 503 because the hold was full. */
  refused: number;
  /** Holds ended, by duration: cumulative counts per `holdDurationBoundsMs` bound, then +Inf. */
  durationBuckets: number[];
  durationSumMs: number;
  ended: number;
}

/** One request in a hold's queue; `gone` runs if its client leaves while it waits. */
interface HeldEntry {
  readonly request: HeldRequest;
  readonly gone: () => void;
  /** A pause's bound on this request's wait. */
  timer?: NodeJS.Timeout;
}

class ActiveHold {
  readonly queue = new Set<HeldEntry>();
  /** performance.now() when this router began holding: the duration is the router's own. */
  readonly startedMs = performance.now();
  heldCount = 0;
  refused = 0;
  /** Clients that went away while held. */
  left = 0;
  timer: NodeJS.Timeout | null = null;

  constructor(
    readonly routeKey: string,
    public spec: WriteHold,
    /** An operator's pause rather than the engine's write hold (its bounds change with a new pause). */
    public pause: PauseSpec | null = null,
  ) {}
}

interface RouteCounters {
  holds: number;
  heldTotal: number;
  refused: number;
  perBucket: number[];
  durationSumMs: number;
  ended: number;
}

/** Every write hold of one router, by route key. */
export class WriteHolds {
  private readonly active = new Map<string, ActiveHold>();
  private readonly last = new Map<string, FinishedHold>();
  /** Route key → the id of a hold that expired: never held again. */
  private readonly expired = new Map<string, string>();
  private readonly counters = new Map<string, RouteCounters>();
  /** Route key → the pause an operator asked for, held while the route is in the table. */
  private readonly pauses: Map<string, PauseSpec>;

  constructor(
    private readonly deps: WriteHoldsDeps,
    pauses: ReadonlyMap<string, PauseSpec> = new Map(),
  ) {
    this.pauses = new Map(pauses);
  }

  /** The hold a new request of the route meets, if any. The hot path: usually an empty map. */
  holding(routeKey: string): ActiveHold | undefined {
    return this.active.size === 0 ? undefined : this.active.get(routeKey);
  }

  /** Holds the request, or answers 503 with Retry-After once `maxHeld` wait. */
  admit(hold: ActiveHold, request: HeldRequest): void {
    if (hold.queue.size >= hold.spec.maxHeld) {
      hold.refused++;
      this.countersOf(hold.routeKey).refused++;
      const why = hold.pause ? 'is paused' : 'is switching';
      refuse(
        request,
        503,
        `cutover: route ${hold.routeKey} ${why} and already holds ${hold.spec.maxHeld} requests; try again shortly\n`,
        { 'retry-after': String(hold.pause ? pauseRetryAfterSeconds : queueFullRetryAfterSeconds) },
      );
      return;
    }
    const entry: HeldEntry = {
      request,
      gone: () => {
        hold.queue.delete(entry);
        if (entry.timer) clearTimeout(entry.timer);
        hold.left++;
        if (!request.socket) request.client.responseClosed();
      },
    };
    request.req.on('error', ignore);
    request.res?.on('error', ignore);
    (request.socket ?? request.res).once('close', entry.gone);
    hold.queue.add(entry);
    if (hold.pause) entry.timer = setTimeout(() => this.waitedTooLong(hold, entry), hold.pause.timeoutMs);
    hold.heldCount++;
    this.countersOf(hold.routeKey).heldTotal++;
  }

  /**
   * After a table is applied (`state` is live): a hold whose entry lost it, or has another id, ends
   * and its requests go by `state`'s weights; a hold new in the table starts.
   */
  reconcile(state: RoutingState): string[] {
    const problems: string[] = [];
    for (const [key, hold] of this.active) {
      const route = state.routes.get(key);
      if (hold.pause ? route !== undefined : route?.hold?.id === hold.spec.id) continue;
      this.end(hold, !route ? 'removed' : route.hold ? 'replaced' : 'released');
    }
    let pausesChanged = false;
    for (const key of this.pauses.keys()) if (!state.routes.has(key)) pausesChanged = this.pauses.delete(key);
    if (pausesChanged) this.deps.savePauses(this.pauses);
    const now = Date.now();
    for (const [key, route] of state.routes) {
      const pause = this.pauses.get(key);
      if (pause) {
        if (!this.active.has(key)) this.startPause(key, pause);
        if (route.hold)
          problems.push(
            `${key}: paused by an operator since ${iso(pause.since)}, so write hold ${route.hold.id} is not taken; resume the route first (cutover proxy resume ${key})`,
          );
        continue;
      }
      const hold = route.hold;
      if (this.expired.has(key) && this.expired.get(key) !== hold?.id) this.expired.delete(key);
      if (!hold || this.active.has(key) || this.expired.get(key) === hold.id) continue;
      if (hold.expiresAt <= now) {
        this.expired.set(key, hold.id);
        this.deps.log(
          `router: route ${key}: not holding: the engine's hold ${hold.id} expired at ${iso(hold.expiresAt)} before this router applied it`,
        );
        continue;
      }
      this.start(key, hold, now);
    }
    for (const key of this.expired.keys()) if (!state.routes.has(key)) this.expired.delete(key);
    return problems;
  }

  /**
   * An operator pauses a route of the table: its new requests wait (see the class). Refused while
   * the engine's write hold is in effect; a route already paused keeps its pause, with these bounds
   * for the requests that come next.
   */
  pause(routeKey: string, state: RoutingState, bounds: Omit<PauseSpec, 'since'>): PauseSpec {
    if (!state.routes.has(routeKey))
      throw new PauseRefused(404, `the router does not serve route ${routeKey}`);
    const active = this.active.get(routeKey);
    if (active && !active.pause)
      throw new PauseRefused(
        409,
        `route ${routeKey} is in a stateful switch's write hold (${active.spec.id}); pause it once the switch is over`,
      );
    const pause: PauseSpec = { since: this.pauses.get(routeKey)?.since ?? Date.now(), ...bounds };
    this.pauses.set(routeKey, pause);
    this.deps.savePauses(this.pauses);
    if (active?.pause) {
      // Same queue, new bounds for the requests that come next: nothing held is released.
      active.spec = { ...active.spec, maxHeld: pause.maxHeld };
      active.pause = pause;
    } else this.startPause(routeKey, pause);
    return pause;
  }

  /** Ends a route's pause: what it holds goes by the weights live now, in the order it came. */
  resume(routeKey: string): FinishedHold {
    const hold = this.active.get(routeKey);
    if (!this.pauses.delete(routeKey) || !hold?.pause)
      throw new PauseRefused(409, `route ${routeKey} is not paused`);
    this.deps.savePauses(this.pauses);
    return this.end(hold, 'resumed');
  }

  /** Route key → id of every hold in effect now (what `POST /reload` answers). */
  inEffect(): Record<string, string> {
    const ids: Record<string, string> = {};
    for (const [key, hold] of this.active) ids[key] = hold.spec.id;
    return ids;
  }

  /** The route's hold now and the last one that ended, for `GET /routes`. */
  snapshot(routeKey: string): { hold?: ControlHold; lastHold?: FinishedHold } {
    const hold = this.active.get(routeKey);
    const last = this.last.get(routeKey);
    return {
      ...(hold
        ? {
            hold: {
              id: hold.spec.id,
              since: hold.spec.since,
              held: hold.queue.size,
              expiresAt: hold.spec.expiresAt,
              maxHeld: hold.spec.maxHeld,
              refused: hold.refused,
              ...(hold.pause ? { pause: hold.pause } : {}),
            },
          }
        : {}),
      ...(last ? { lastHold: last } : {}),
    };
  }

  /** Keeps counters for exactly the routes of the table now served (after each reload). */
  keepRoutes(routeKeys: Iterable<string>): void {
    const keep = new Set(routeKeys);
    for (const key of this.counters.keys()) if (!keep.has(key)) this.counters.delete(key);
    for (const key of this.last.keys()) if (!keep.has(key)) this.last.delete(key);
    for (const key of keep) this.countersOf(key);
  }

  metrics(): RouteHoldMetrics[] {
    return [...this.counters.keys()].sort().map((route) => {
      const c = this.countersOf(route);
      let running = 0;
      return {
        route,
        held: this.active.get(route)?.queue.size ?? 0,
        holds: c.holds,
        heldTotal: c.heldTotal,
        refused: c.refused,
        durationBuckets: c.perBucket.map((count) => {
          running += count;
          return running;
        }),
        durationSumMs: c.durationSumMs,
        ended: c.ended,
      };
    });
  }

  private startPause(key: string, pause: PauseSpec): void {
    const hold = new ActiveHold(
      key,
      {
        id: `pause@${pause.since}`,
        since: pause.since,
        expiresAt: Number.MAX_SAFE_INTEGER,
        maxHeld: pause.maxHeld,
      },
      pause,
    );
    this.active.set(key, hold);
    this.countersOf(key).holds++;
    this.deps.log(
      `router: route ${key}: paused: holding new requests (at most ${pause.maxHeld}, each at most ${pause.timeoutMs / 1000}s)`,
    );
  }

  /** A paused request waited its bound: 503 with Retry-After, and it leaves the queue. */
  private waitedTooLong(hold: ActiveHold, entry: HeldEntry): void {
    if (!hold.queue.delete(entry)) return;
    stopWatching(entry);
    hold.refused++;
    this.countersOf(hold.routeKey).refused++;
    refuse(
      entry.request,
      503,
      `cutover: route ${hold.routeKey} is paused; this request waited ${(hold.pause?.timeoutMs ?? 0) / 1000}s; try again later\n`,
      { 'retry-after': String(pauseRetryAfterSeconds) },
    );
  }

  /** The router is stopping: held requests hear 503 with Retry-After (their clients may come back). */
  stopAll(): void {
    for (const hold of this.active.values()) this.end(hold, 'router-stopped');
  }

  private start(key: string, spec: WriteHold, now: number): void {
    const hold = new ActiveHold(key, spec);
    this.active.set(key, hold);
    this.countersOf(key).holds++;
    this.arm(hold, spec.expiresAt - now);
    this.deps.log(
      `router: route ${key}: holding new requests (hold ${spec.id}, at most ${spec.maxHeld}, until ${iso(spec.expiresAt)})`,
    );
  }

  private arm(hold: ActiveHold, delayMs: number): void {
    hold.timer = setTimeout(() => this.expire(hold), Math.max(0, delayMs));
  }

  /** The engine's bound passed: release by the weights live now, and never hold this id again. */
  private expire(hold: ActiveHold): void {
    if (this.active.get(hold.routeKey) !== hold) return;
    const left = hold.spec.expiresAt - Date.now();
    if (left > 0) {
      this.arm(hold, left); // a timer may fire a little early
      return;
    }
    this.expired.set(hold.routeKey, hold.spec.id);
    this.end(hold, 'expired');
  }

  private end(hold: ActiveHold, how: HoldEnd): FinishedHold {
    if (hold.timer) clearTimeout(hold.timer);
    this.active.delete(hold.routeKey);
    const durationMs = performance.now() - hold.startedMs;
    const route = how === 'router-stopped' ? undefined : this.deps.currentRoute(hold.routeKey);
    const releasedTo = route ? releasedToOf(route) : 'none';
    const entries = [...hold.queue];
    hold.queue.clear();
    for (const entry of entries) {
      if (entry.timer) clearTimeout(entry.timer);
      const request = stopWatching(entry);
      // A client gone whose 'close' is still to come: nothing goes upstream for it.
      if (clientGone(request)) {
        hold.left++;
        if (request.socket) request.socket.destroy();
        else request.res.once('close', () => request.client.responseClosed());
        continue;
      }
      if (how === 'router-stopped')
        refuse(request, 503, 'cutover: the router is stopping; try again shortly\n', {
          'retry-after': String(queueFullRetryAfterSeconds),
        });
      else this.deps.forward(request);
    }
    const finished: FinishedHold = {
      id: hold.spec.id,
      heldCount: hold.heldCount,
      durationMs: Math.round(durationMs),
      releasedTo,
      ended: how,
      ...(hold.pause ? { kind: 'pause' as const } : {}),
      refused: hold.refused,
      left: hold.left,
      endedAt: Date.now(),
    };
    this.last.set(hold.routeKey, finished);
    const counters = this.countersOf(hold.routeKey);
    counters.ended++;
    counters.durationSumMs += durationMs;
    const bucket = holdDurationBoundsMs.findIndex((bound) => durationMs <= bound);
    const index = bucket < 0 ? holdDurationBoundsMs.length : bucket;
    counters.perBucket[index] = (counters.perBucket[index] as number) + 1;
    this.deps.log(`router: route ${hold.routeKey}: ${describeEnd(finished, hold.spec)}`);
    return finished;
  }

  private countersOf(key: string): RouteCounters {
    let counters = this.counters.get(key);
    if (!counters) {
      counters = {
        holds: 0,
        heldTotal: 0,
        refused: 0,
        perBucket: new Array<number>(holdDurationBoundsMs.length + 1).fill(0),
        durationSumMs: 0,
        ended: 0,
      };
      this.counters.set(key, counters);
    }
    return counters;
  }
}

/** Where the route's table sends a request now: all to one slot, or split between them. */
function releasedToOf(route: RouteState): ReleasedTo {
  const hasBlue = route.blue.length > 0;
  const hasGreen = route.green.length > 0;
  if (hasGreen && (!hasBlue || route.greenPercent >= 100)) return 'green';
  if (hasBlue && (!hasGreen || route.greenPercent <= 0)) return 'blue';
  return hasBlue ? 'weights' : 'none';
}

/** "held 37 requests for 412 ms, released to green (hold h1)", and what else the reader must know. */
function describeEnd(finished: FinishedHold, spec: WriteHold): string {
  const held = `held ${finished.heldCount} request${finished.heldCount === 1 ? '' : 's'} for ${finished.durationMs} ms`;
  const extra = [
    finished.left > 0 ? `${finished.left} left before it ended` : '',
    finished.refused > 0 ? `${finished.refused} refused (503): the hold was full` : '',
  ].filter(Boolean);
  const tail = `(hold ${finished.id}${extra.length > 0 ? `; ${extra.join('; ')}` : ''})`;
  switch (finished.ended) {
    case 'released':
    case 'replaced':
      return `${held}, released to ${finished.releasedTo} ${tail}`;
    case 'resumed':
      return `resumed: ${held}, released to ${finished.releasedTo} in the order they came ${tail}`;
    case 'expired':
      return `the engine's hold outlived its bound (${iso(spec.expiresAt)}): ${held}, released by the weights now live, to ${finished.releasedTo}; holding nothing new ${tail}`;
    case 'removed':
      return `${held}, then the route left the table: answered 503 ${tail}`;
    case 'router-stopped':
      return `${held}, then the router stopped: answered 503 ${tail}`;
    default: {
      const never: never = finished.ended;
      throw new Error(`unknown hold end ${String(never)}`);
    }
  }
}

function clientGone(request: HeldRequest): boolean {
  const { socket, res } = request;
  // An upgrade's client that ended its side sent nothing more to upgrade (its 'close' comes next).
  if (socket) return socket.destroyed || socket.readableEnded;
  return res.destroyed || res.socket === null || res.socket.destroyed;
}

/** The router's own answer to a held request, or to a held upgrade (on its socket, as HTTP). */
function refuse(request: HeldRequest, status: number, text: string, headers: Record<string, string>): void {
  if (request.socket) refuseUpgrade(request.socket, status, text, headers);
  else refuseRequest(request.req, request.res, request.client, status, text, headers);
}

/** The entry leaves the queue: its client's leaving is no longer watched. */
function stopWatching(entry: HeldEntry): HeldRequest {
  const { request } = entry;
  (request.socket ?? request.res).off('close', entry.gone);
  return request;
}

function iso(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

function ignore(): void {}

/** A pause or resume the router will not do: the control API's status, and why. */
export class PauseRefused extends Error {
  override readonly name = 'PauseRefused';
  constructor(
    readonly status: 404 | 409,
    message: string,
  ) {
    super(message);
  }
}
