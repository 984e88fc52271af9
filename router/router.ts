/**
 * The built-in router: the long-running reverse proxy behind `cutover proxy`.
 *
 * It serves `<stateDir>/router/routes.json` (router/route-table.ts) and nothing else: for
 * each route a listener on `listen` splitting traffic between blue and green by `greenPercent`
 * (smooth weighted round robin, then round robin over the slot's replicas), and one on `preview`
 * sending everything to green. The table is the router's only persisted state, so a router killed
 * with -9 and started again serves exactly the same routes; in-flight counts start from zero then,
 * which is true, since the dead router's connections died with it.
 *
 * Invariants:
 * - A table version replaces the whole routing state in one assignment; a request picks its upstream
 *   from the state live when it arrives and finishes there (failover picks from the newest state).
 * - A reload, whether from the file watch, the 500 ms poll or `POST /reload`, starts reading the
 *   table after it was asked for; `POST /reload` answers once the new state is live and listeners
 *   are open, so a switch by the engine is synchronous.
 * - Requests are counted in flight, per route and per upstream address, until their response to the
 *   client is finished; that is what `waitDrained` watches. A request held by a write hold
 *   (write-holds.ts) is in flight nowhere until it is released: it picks its upstream from the state
 *   live at its release, and the release is done before the reload that made it is answered.
 * - One router per state directory, recorded in `<stateDir>/router/router.json` (router-record.ts).
 * - Every response of a route is counted once, when it ends, on the slot that answered it
 *   (slot-metrics.ts): counters only grow while the router runs, and restart from zero with it.
 */
import { mkdir, readFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import path from 'node:path';
import type { RouteTraffic } from '../core/analysis/traffic.js';
import { CutoverError } from '../core/errors.js';
import { certificateMetricsText } from './certificate-metrics.js';
import { CertificateStore } from './certificate-store.js';
import { type ControlServer, startRouterControl } from './control.js';
import { controlListenFor, defaultControlListen, keepControlListen } from './control-address.js';
import type {
  FinishedHold,
  ListenFailure,
  PauseSpec,
  ReloadResult,
  RoutesSnapshot,
} from './control-types.js';
import { answerAtEdge } from './edge-answers.js';
import { InFlightRegistry } from './in-flight.js';
import { renderMetricsText } from './metrics-text.js';
import { readPauses, writePauses } from './pauses.js';
import { type ProxyDeps, proxyRequest, sendText } from './proxy-request.js';
import { proxyUpgrade, type UpgradeDeps } from './proxy-upgrade.js';
import { refuseUpgrade } from './refusals.js';
import { BodyBudget } from './replayable-body.js';
import { ReplicationFigures, type ReplicationReport } from './replication-lag.js';
import { RouteListeners } from './route-listeners.js';
import { routingTablePath } from './route-table.js';
import {
  claimRouterRecord,
  liveRouterRecord,
  releaseRouterRecord,
  routerRecordPath,
} from './router-record.js';
import {
  type Binding,
  buildRoutingState,
  emptyRoutingState,
  type RouteState,
  type RoutingState,
} from './routing-state.js';
import { SlotMetrics } from './slot-metrics.js';
import { UpgradedConnections, upgradeMetricsText } from './upgraded-connections.js';
import { UpstreamPools } from './upstream-pools.js';
import { type TableWatch, watchTable } from './watch-table.js';
import { type HeldRequest, WriteHolds } from './write-holds.js';

/** On close, requests still unanswered after this long are cut. */
export const routerCloseGraceMs = 10_000;
/**
 * How long an upgraded connection the router closes (a drain past its timeout, its listener going
 * away: its route left the table or moved, the router stopping) has to answer its close frame and
 * end; it is cut after.
 */
export const upgradeCloseGraceMs = 2_000;

export interface RouterOptions {
  stateDir: string;
  log: (line: string) => void;
  /** Serve the control API and claim the router record (default). Off only for embedding. */
  control?: boolean;
  /** How long an idle client keep-alive connection is kept; default `clientKeepAliveTimeoutMs` (75 s). */
  keepAliveTimeoutMs?: number;
  /**
   * `cutover proxy --control-listen`: the control API's host:port, kept in the state directory for
   * the routers after this one (control-address.ts). Absent: the kept one, else a random port.
   */
  controlListen?: string;
}

export interface Router {
  readonly stateDir: string;
  /** Port of the control API on 127.0.0.1, or null without one. */
  readonly controlPort: number | null;
  /** The control API's host:port, or null without one. */
  readonly controlAddress: string | null;
  reload(): Promise<ReloadResult>;
  routes(): RoutesSnapshot;
  /** Requests of a route in flight to any of `addresses`. */
  inFlight(routeKey: string, addresses: readonly string[]): number;
  /** Upgraded connections (WebSockets) of a route open to any of `addresses`. */
  upgraded(routeKey: string, addresses: readonly string[]): number;
  /** Closes them cleanly (1001 for a WebSocket); resolves with how many there were once they are closed. */
  closeUpgraded(routeKey: string, addresses: readonly string[]): Promise<number>;
  /** An operator's pause of a route (write-holds.ts); throws PauseRefused for a route it cannot pause. */
  pause(routeKey: string, bounds: Omit<PauseSpec, 'since'>): PauseSpec;
  /** Ends a route's pause; what it held goes on, in order. Throws PauseRefused when it is not paused. */
  resume(routeKey: string): FinishedHold;
  /** A route's requests, 5xx and latency per slot since the router started (or the route entered the table). */
  traffic(routeKey: string): RouteTraffic | null;
  /** Every route's traffic in Prometheus's text format. */
  metricsText(): string;
  /** The engine's last measure of a switched component's replication lag, for `/metrics`. */
  reportReplication(report: ReplicationReport): void;
  /** Stops accepting, lets requests in flight finish (up to `routerCloseGraceMs`), releases the record. */
  close(): Promise<void>;
}

export async function startRouter(options: RouterOptions): Promise<Router> {
  await mkdir(path.dirname(routingTablePath(options.stateDir)), { recursive: true });
  const router = new TableRouter(options.stateDir, options.log, options.keepAliveTimeoutMs);
  try {
    if (options.control !== false) await router.startControl(options.controlListen);
    await router.reload();
  } catch (error) {
    await router.close();
    throw error;
  }
  router.watch();
  return router;
}

class TableRouter implements Router {
  private state: RoutingState = emptyRoutingState;
  private lastTableText: string | null | undefined = undefined;
  /** How many tables that differ from the one before this router has applied since it started. */
  private generation = 0;
  private readonly inFlightRegistry = new InFlightRegistry();
  private readonly pools = new UpstreamPools();
  private readonly metrics = new SlotMetrics();
  private readonly replication = new ReplicationFigures();
  private readonly upgrades = new UpgradedConnections();
  private readonly holds: WriteHolds;
  private readonly certificates: CertificateStore;
  private readonly listeners: RouteListeners;
  private control: ControlServer | null = null;
  private claimed = false;
  private tableWatch: TableWatch | null = null;
  private running: Promise<ReloadResult> | null = null;
  private queued: Promise<ReloadResult> | null = null;
  private reported = new Set<string>();
  /** The listeners the last reload could not open (retried while the table watch runs). */
  private unbound: ListenFailure[] = [];
  private closed = false;

  constructor(
    readonly stateDir: string,
    private readonly log: (line: string) => void,
    keepAliveTimeoutMs?: number,
  ) {
    const deps: ProxyDeps & UpgradeDeps = {
      currentRoute: (key) => this.state.routes.get(key),
      pools: this.pools,
      inFlight: this.inFlightRegistry,
      bodies: new BodyBudget(),
      metrics: this.metrics,
      upgrades: this.upgrades,
    };
    // A held request goes by the table live when it is released, from the listener it came in on.
    const forward = (held: HeldRequest) => {
      const { binding, req, arrivedMs } = held;
      const route = this.state.routes.get(binding.routeKey);
      if (held.socket) {
        if (!route) return refuseUpgrade(held.socket, 503, noLongerServed(binding.routeKey));
        return proxyUpgrade(deps, binding, route, req, held.socket, held.head, arrivedMs);
      }
      if (!route) return goneRoute(binding.routeKey, held.res, held.client);
      proxyRequest(deps, binding, route, req, held.res, held.client, arrivedMs);
    };
    this.holds = new WriteHolds(
      {
        currentRoute: (key) => this.state.routes.get(key),
        forward,
        log,
        savePauses: (pauses) => writePauses(stateDir, pauses),
      },
      readPauses(stateDir, log),
    );
    const certificates = new CertificateStore(log);
    this.certificates = certificates;
    this.listeners = new RouteListeners(
      (listener, client, req, res) => {
        const state = this.state;
        const binding = state.bindings.get(listener.address) ?? listener.binding;
        const route = state.routes.get(binding.routeKey);
        if (!route) return goneRoute(binding.routeKey, res, client);
        if (route.tls && answerAtEdge(listener, binding, route, req, res, client)) return;
        const hold = this.holds.holding(binding.routeKey);
        if (hold) return this.holds.admit(hold, { binding, req, res, client, arrivedMs: performance.now() });
        proxyRequest(deps, binding, route, req, res, client);
      },
      keepAliveTimeoutMs,
      certificates,
      (listener, req, socket, head) => {
        const binding = this.state.bindings.get(listener.address) ?? listener.binding;
        const route = this.state.routes.get(binding.routeKey);
        if (!route) return refuseUpgrade(socket, 503, noLongerServed(binding.routeKey));
        // A held route's handshake waits with its requests, and goes where the release sends it.
        const hold = this.holds.holding(binding.routeKey);
        if (hold) return this.holds.admit(hold, { binding, req, socket, head, arrivedMs: performance.now() });
        proxyUpgrade(deps, binding, route, req, socket, head);
      },
      (sockets) => void this.upgrades.closeClients(sockets, upgradeCloseGraceMs),
    );
  }

  get controlPort(): number | null {
    return this.control?.port ?? null;
  }

  get controlAddress(): string | null {
    if (!this.control) return null;
    const { host, port } = this.control;
    return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  }

  async startControl(controlListen?: string): Promise<void> {
    const listen = controlListenFor(this.stateDir, controlListen);
    // A fixed address is taken by the router that runs: say that, rather than "address in use".
    const running = liveRouterRecord(this.stateDir);
    if (running)
      throw new CutoverError('USAGE', `a router already serves ${this.stateDir} (pid ${running.pid})`);
    this.control = await startRouterControl(this, listen);
    const { host, port, token } = this.control;
    const claim = claimRouterRecord(this.stateDir, {
      port,
      token,
      ...(host === defaultControlListen.host ? {} : { host }),
    });
    if (!claim.claimed) {
      // No readable holder, yet not replaceable: something else than a record is in the way (or,
      // rarely, another router came and went meanwhile).
      if (!claim.holder)
        throw new CutoverError(
          'STATE_CORRUPT',
          `cannot take ${routerRecordPath(this.stateDir)}: it is no live router's record and cannot be replaced; if no router runs, move it away`,
        );
      throw new CutoverError('USAGE', `a router already serves ${this.stateDir} (pid ${claim.holder.pid})`);
    }
    this.claimed = true;
    if (controlListen !== undefined) keepControlListen(this.stateDir, controlListen);
  }

  watch(): void {
    const file = routingTablePath(this.stateDir);
    const reloadQuietly = () => {
      this.reload().catch((error: Error) => this.report(`routing table not applied: ${error.message}`));
    };
    this.tableWatch = watchTable(
      file,
      reloadQuietly,
      () => this.listeners.missing(this.state.bindings).length > 0,
    );
  }

  /** Coalesces: a reload asked for while one runs shares the single reload that starts after it. */
  reload(): Promise<ReloadResult> {
    if (this.closed) return Promise.reject(new CutoverError('USAGE', 'the router is closed'));
    if (this.queued) return this.queued;
    if (!this.running) return this.runReload();
    this.queued = this.running
      .catch(() => undefined)
      .then(() => {
        this.queued = null;
        return this.runReload();
      });
    return this.queued;
  }

  private runReload(): Promise<ReloadResult> {
    this.running = this.apply().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async apply(): Promise<ReloadResult> {
    const text = await readTable(this.stateDir);
    let next = this.state;
    if (text !== this.lastTableText) {
      let table: unknown;
      try {
        table = text === null ? { version: 1, routes: {} } : JSON.parse(text);
      } catch (error) {
        throw new CutoverError(
          'STATE_CORRUPT',
          `${routingTablePath(this.stateDir)}: ${(error as Error).message}`,
        );
      }
      next = buildRoutingState(table, this.state);
      this.lastTableText = text;
      this.generation++;
    }
    if (this.closed) throw new CutoverError('USAGE', 'the router is closed');
    const previous = this.state;
    this.listeners.stopUnwanted(next.bindings);
    this.state = next; // the switch
    // Held requests go now, by this table: synchronously, before the reload is answered.
    const holdProblems = this.holds.reconcile(next);
    this.metrics.keepRoutes(next.routes.keys());
    this.holds.keepRoutes(next.routes.keys());
    this.upgrades.keepRoutes(next.routes.keys());
    // A TLS listener opens only with its certificates (a failure says why; the last good are kept).
    await this.certificates.update(next.routes);
    const unbound = await this.listeners.openMissing(next.bindings);
    this.logChanges(previous, next);
    const inUse = addressesInUse(next);
    this.pools.sweep(inUse, (address) => this.inFlightRegistry.toAddress(address));
    this.pools.keepWarm(blueAddresses(next));
    const problems = [
      ...next.problems,
      ...holdProblems,
      ...unbound.map((u) => `cannot listen on ${u.address} for ${u.routeKey}: ${u.cause}`),
    ];
    for (const problem of problems) this.report(problem);
    this.reported = new Set(problems);
    this.unbound = unbound;
    return {
      version: next.version,
      generation: this.generation,
      routes: next.routes.size,
      problems,
      unbound,
      holds: this.holds.inEffect(),
    };
  }

  routes(): RoutesSnapshot {
    const state = this.state;
    const routes: RoutesSnapshot['routes'] = {};
    for (const [key, route] of state.routes) {
      const tls = route.tls ? this.certificates.snapshot(key) : undefined;
      routes[key] = {
        listen: route.listen,
        ...(route.preview !== undefined ? { preview: route.preview } : {}),
        greenPercent: route.greenPercent,
        blue: [...route.blue],
        green: [...route.green],
        inFlight: this.inFlightRegistry.route(key),
        upgraded: this.upgrades.route(key),
        ...this.holds.snapshot(key),
        ...(tls === undefined ? {} : { tls }),
      };
    }
    // Listeners of the table not open now: the last reload's failure, else still being opened.
    const failed = new Map(this.unbound.map((u) => [u.address, u]));
    const unbound = this.listeners.missing(state.bindings).map((address): ListenFailure => {
      const binding = state.bindings.get(address) as Binding;
      const failure = failed.get(address);
      if (failure) return failure;
      return {
        routeKey: binding.routeKey,
        kind: binding.kind,
        address,
        cause: 'being opened',
        opening: true,
      };
    });
    return {
      version: state.version,
      generation: this.generation,
      routes,
      problems: [...state.problems],
      unbound,
    };
  }

  inFlight(routeKey: string, addresses: readonly string[]): number {
    return this.inFlightRegistry.count(routeKey, addresses);
  }

  upgraded(routeKey: string, addresses: readonly string[]): number {
    return this.upgrades.count(routeKey, addresses);
  }

  closeUpgraded(routeKey: string, addresses: readonly string[]): Promise<number> {
    return this.upgrades.close(routeKey, addresses, upgradeCloseGraceMs);
  }

  pause(routeKey: string, bounds: Omit<PauseSpec, 'since'>): PauseSpec {
    return this.holds.pause(routeKey, this.state, bounds);
  }

  resume(routeKey: string): FinishedHold {
    return this.holds.resume(routeKey);
  }

  traffic(routeKey: string): RouteTraffic | null {
    return this.metrics.traffic(routeKey);
  }

  metricsText(): string {
    return (
      renderMetricsText(
        this.metrics.all(),
        this.metrics.startedAt,
        this.holds.metrics(),
        this.replication.current(),
      ) +
      upgradeMetricsText(this.upgrades.metrics()) +
      certificateMetricsText(this.certificates.metrics())
    );
  }

  reportReplication(report: ReplicationReport): void {
    this.replication.report(report);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.tableWatch?.stop();
    await this.running?.catch(() => undefined);
    this.holds.stopAll();
    // Upgraded connections are closed with their listeners (closeClients, 1001 for a WebSocket).
    await this.listeners.closeAll(routerCloseGraceMs);
    this.pools.destroyAll();
    this.certificates.close();
    if (this.claimed) releaseRouterRecord(this.stateDir);
    await this.control?.close();
  }

  /** Logs a problem once, until it goes away and comes back. */
  private report(problem: string): void {
    if (!this.reported.has(problem)) this.log(`router: ${problem}`);
    this.reported.add(problem);
  }

  private logChanges(previous: RoutingState, next: RoutingState): void {
    for (const [key, route] of next.routes) {
      const before = previous.routes.get(key);
      if (before && describe(before) === describe(route)) continue;
      // At a commit the engine makes green the live (blue) slot: say so, rather than "100% blue",
      // which reads as if traffic had gone back.
      if (before && promoted(before, route))
        this.log(`router: ${key} green promoted: it is the live slot now, ${describe(route)}`);
      else this.log(`router: ${key} ${describe(route)}`);
    }
    for (const key of previous.routes.keys()) {
      if (!next.routes.has(key)) this.log(`router: ${key} removed`);
    }
  }
}

/** A request of a route the table no longer has. */
function goneRoute(routeKey: string, res: ServerResponse, client: { responseClosed(): void }): void {
  res.once('close', () => client.responseClosed());
  res.setHeader('connection', 'close');
  sendText(res, 503, noLongerServed(routeKey));
}

function noLongerServed(routeKey: string): string {
  return `cutover: route ${routeKey} is no longer served\n`;
}

function describe(route: RouteState): string {
  const preview = route.preview ? `, preview ${route.preview}` : '';
  const blue = `${100 - route.greenPercent}% blue [${route.blue.join(' ')}]`;
  const green = `${route.greenPercent}% green [${route.green.join(' ')}]`;
  return `on ${route.listen}${preview}: ${blue}, ${green}`;
}

/** `after`'s blue is `before`'s green: green became the live slot, and nothing else is left. */
function promoted(before: RouteState, after: RouteState): boolean {
  return (
    before.green.length > 0 &&
    after.green.length === 0 &&
    after.blue.length === before.green.length &&
    after.blue.every((address) => before.green.includes(address))
  );
}

function addressesInUse(state: RoutingState): Set<string> {
  const inUse = new Set<string>();
  for (const route of state.routes.values())
    for (const address of [...route.blue, ...route.green]) inUse.add(address);
  return inUse;
}

/** Where a rollback would send every request at once: each route's blue slot. */
function blueAddresses(state: RoutingState): Set<string> {
  const blue = new Set<string>();
  for (const route of state.routes.values()) for (const address of route.blue) blue.add(address);
  return blue;
}

async function readTable(stateDir: string): Promise<string | null> {
  try {
    return await readFile(routingTablePath(stateDir), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}
