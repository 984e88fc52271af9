import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { environmentCause } from '../core/errors.js';
import { parseHostPort } from '../core/host-port.js';
import type { CertificateStore } from './certificate-store.js';
import type { ListenFailure } from './control-types.js';
import { Http1Side } from './http1-server.js';
import { type Http2Side, serveHttp2 } from './http2-clients.js';
import { listenerServer } from './listener-servers.js';
import type { ProxyListener } from './proxy-request.js';
import { type ListenerProtocol, sameProtocol } from './route-tls.js';
import type { Binding } from './routing-state.js';

/** A port another listener is letting go of (a route moved) is retried this often, this many times. */
export const bindRetryIntervalMs = 50;
export const bindAttempts = 6;

/**
 * How long an idle client keep-alive connection is kept: nginx's `keepalive_timeout` default (Node's
 * own, 5 s, is shorter than most clients keep theirs). Node announces it (`Keep-Alive: timeout=75`)
 * and closes a second after. Closing an idle connection races a request the client sends on it
 * meanwhile; with 5 s, a write hold's burst of new connections fell idle together and was closed
 * under the next burst 6 s later (writes failed on reused connections in fresh-clone runs).
 */
export const clientKeepAliveTimeoutMs = 75_000;

/** One HTTP listener of a route. `binding` is what it served when last in the table. */
export interface RouteListener {
  readonly address: string;
  readonly server: Server;
  /** Its HTTP/1.1 clients' connections. */
  readonly http1: Http1Side;
  binding: Binding;
  /** How it speaks (opened so): a binding that asks for another is served by a new listener. */
  readonly protocol: ListenerProtocol;
  /** Its HTTP/2 clients (TLS with h2, or h2c), if it takes any. */
  http2?: Http2Side;
  /** No longer in the table: answers what is in flight and on open connections, accepts no more. */
  closing: boolean;
  /**
   * To call once a response of this listener is over (its 'close'): a closing listener lets each
   * keep-alive connection go as soon as it is idle, rather than after the keep-alive timeout. (The
   * handler calls it from its own 'close' listener: one listener less per request.)
   */
  responseClosed(): void;
}

/**
 * Answers one request; calls `client.responseClosed()` once the response is over (the client
 * connection tells the listener). Requests of one connection come one at a time (http1-connection.ts).
 */
export type ListenerHandler = (
  listener: RouteListener,
  client: ProxyListener,
  req: IncomingMessage,
  res: ServerResponse,
) => void;

/** Proxies an upgrade request of `listener` (proxy-upgrade.ts). */
export type ListenerUpgradeHandler = (
  listener: RouteListener,
  req: IncomingMessage,
  socket: Socket,
  head: Buffer,
) => void;

/**
 * Closes the upgraded connections (and handshakes under way) of a listener that stops: `sockets`,
 * its clients' (the router's UpgradedConnections.closeClients).
 */
export type UpgradesCloser = (sockets: Socket[]) => void;

/**
 * The set of listeners the table asks for. Reconciling is two idempotent steps: stop those no longer
 * wanted (they stop accepting at once and close once their requests are answered; their upgraded
 * connections are closed as a drain closes them, `closeUpgrades`), then open those missing. A
 * listener that fails to open stays missing and is retried at the next reconcile.
 */
export class RouteListeners {
  private readonly live = new Map<string, RouteListener>();
  private readonly draining = new Map<RouteListener, Promise<void>>();

  constructor(
    private readonly handler: ListenerHandler,
    private readonly keepAliveTimeoutMs = clientKeepAliveTimeoutMs,
    private readonly certificates: CertificateStore,
    private readonly upgradeHandler?: ListenerUpgradeHandler,
    private readonly closeUpgrades?: UpgradesCloser,
  ) {}

  stopUnwanted(wanted: ReadonlyMap<string, Binding>): void {
    for (const [address, listener] of this.live) {
      const binding = wanted.get(address);
      if (binding && sameProtocol(binding.protocol, listener.protocol)) continue;
      this.live.delete(address);
      listener.closing = true;
      const closed = new Promise<void>((resolve) => listener.server.close(() => resolve()));
      listener.http1.closeIdleConnections();
      this.closeUpgrades?.(listener.http1.upgradedSockets());
      listener.http2?.close();
      this.draining.set(listener, closed);
      void closed.then(() => this.draining.delete(listener));
    }
  }

  /** Opens every wanted listener not open yet; answers those that failed, by address. */
  async openMissing(wanted: ReadonlyMap<string, Binding>): Promise<ListenFailure[]> {
    const failures: ListenFailure[] = [];
    const opening = [...wanted].map(async ([address, binding]) => {
      const open = this.live.get(address);
      if (open) {
        open.binding = binding;
        return;
      }
      try {
        this.live.set(address, await this.open(address, binding));
      } catch (error) {
        const cause = environmentCause(error) ?? (error as Error).message;
        failures.push({ routeKey: binding.routeKey, kind: binding.kind, address, cause });
      }
    });
    await Promise.all(opening);
    return failures.sort((a, b) => a.address.localeCompare(b.address));
  }

  missing(wanted: ReadonlyMap<string, Binding>): string[] {
    return [...wanted.keys()].filter((address) => !this.live.has(address));
  }

  /** Listen address → the port actually bound (differs from the table's only for port 0). */
  ports(): Map<string, number> {
    const ports = new Map<string, number>();
    for (const [address, listener] of this.live) {
      const bound = listener.server.address();
      if (bound !== null && typeof bound !== 'string') ports.set(address, bound.port);
    }
    return ports;
  }

  /** Stops every listener; requests still unanswered after `graceMs` are cut. */
  async closeAll(graceMs: number): Promise<void> {
    this.stopUnwanted(new Map());
    const all = [...this.draining];
    const cut = setTimeout(() => {
      for (const [listener] of all) {
        listener.http1.closeAllConnections();
        listener.http2?.destroy();
      }
    }, graceMs);
    await Promise.all(all.map(([, closed]) => closed));
    clearTimeout(cut);
  }

  private async open(address: string, binding: Binding): Promise<RouteListener> {
    const target = parseHostPort(address);
    if (!target) throw new Error('not host:port');
    for (let attempt = 1; ; attempt++) {
      // The route it serves now: a table may give its address to another route.
      let opened: RouteListener | undefined;
      const { server, connectionEvent } = listenerServer(
        binding.protocol,
        () => (opened ?? { binding }).binding.routeKey,
        this.certificates,
      );
      const listener: RouteListener = {
        address,
        binding,
        protocol: binding.protocol,
        closing: false,
        server,
        // Set below: the HTTP/1.1 side needs the listener first.
        http1: undefined as unknown as Http1Side,
        // The request may have begun before the listener was closing.
        responseClosed: () => {
          if (listener.closing) setImmediate(() => listener.http1.closeIdleConnections());
        },
      };
      opened = listener;
      const handle = (client: ProxyListener, req: IncomingMessage, res: ServerResponse) =>
        this.handler(listener, client, req, res);
      const upgrade = this.upgradeHandler;
      // The router's own HTTP/1.1 objects stand in for Node's: they have what the proxy uses of
      // them (http1-exchange.ts), as the HTTP/2 compatibility objects do (http2-clients.ts).
      (listener as { http1: Http1Side }).http1 = new Http1Side(
        server,
        connectionEvent,
        listener,
        this.keepAliveTimeoutMs,
        (connection, req, res) =>
          handle(
            connection as unknown as ProxyListener,
            req as unknown as IncomingMessage,
            res as unknown as ServerResponse,
          ),
        upgrade &&
          ((req, socket, head) => upgrade(listener, req as unknown as IncomingMessage, socket, head)),
      );
      const { protocol } = binding;
      if (protocol.type === 'tls' ? protocol.http2 : protocol.h2c)
        listener.http2 = serveHttp2(
          server,
          connectionEvent,
          protocol.type === 'tls' ? 'alpn' : 'preface',
          listener,
          handle,
          this.keepAliveTimeoutMs,
        );
      try {
        await listen(listener.server, target.host, target.port);
        return listener;
      } catch (error) {
        const inUse = (error as NodeJS.ErrnoException).code === 'EADDRINUSE';
        if (!inUse || attempt >= bindAttempts) throw error;
        await sleep(bindRetryIntervalMs);
      }
    }
  }
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      server.on('error', () => undefined);
      resolve();
    });
  });
}
