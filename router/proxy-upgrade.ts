import { type IncomingMessage, request } from 'node:http';
import type { Socket } from 'node:net';
import { parseHostPort } from '../core/host-port.js';
import { clientResponseHeaders, type RawHeaders, upstreamRequestHeaders } from './forward-headers.js';
import type { Lease } from './in-flight.js';
import { maxUpstreamAttempts, type ProxyDeps } from './proxy-request.js';
import { refuseUpgrade } from './refusals.js';
import {
  type Binding,
  chooseSlot,
  failoverTarget,
  nextReplica,
  type RouteState,
  type Slot,
} from './routing-state.js';
import type { OpenRequest } from './slot-metrics.js';
import { UpgradeTunnel } from './upgrade-tunnel.js';
import type { UpgradedConnections } from './upgraded-connections.js';

export interface UpgradeDeps extends ProxyDeps {
  upgrades: UpgradedConnections;
}

/**
 * Proxies a request that asks to upgrade its connection (`Connection: upgrade` and `Upgrade`, a
 * WebSocket's handshake): to the slot and replica the route's weights choose for it, as any
 * request, counted in flight until the upstream answers. A 101 turns the connection into a tunnel
 * to that upstream (upgrade-tunnel.ts), which stays there whatever the table does next; any other
 * answer goes to the client as a response, and the connection closes after it (Node's parser has
 * let go of it). As for other requests, it goes to another replica only when it never reached the
 * first (the connection could not be made). `arrivedMs` (performance.now()): when the handshake
 * came, for one a hold kept first (write-holds.ts; its duration counts from then).
 */
export function proxyUpgrade(
  deps: UpgradeDeps,
  binding: Binding,
  route: RouteState,
  req: IncomingMessage,
  socket: Socket,
  head: Buffer,
  arrivedMs = performance.now(),
): void {
  new UpgradeHandshake(deps, binding, route, req, socket, head, arrivedMs).start();
}

const noneTried: ReadonlySet<string> = new Set();

class UpgradeHandshake {
  private readonly tried: string[] = [];
  private slot: Slot = 'blue';
  private lease: Lease | null = null;
  private open: OpenRequest | null = null;
  /** The answer (a 101, a response, a refusal) went to the client: nothing else is tried. */
  private answered = false;
  private status = 0;

  constructor(
    private readonly deps: UpgradeDeps,
    private readonly binding: Binding,
    private readonly route: RouteState,
    private readonly req: IncomingMessage,
    private readonly socket: Socket,
    private readonly head: Buffer,
    private readonly arrivedMs: number,
  ) {}

  start(): void {
    const { route, req, socket } = this;
    socket.on('error', ignore);
    // A body would go before the new protocol's bytes; nothing here sends one (RFC 6455: a GET).
    if (upstreamRequestHeaders(req, '').body !== 'none') {
      refuseUpgrade(socket, 400, 'cutover: an upgrade request with a body is not supported\n');
      return;
    }
    const slot = chooseSlot(route, this.binding.kind);
    const address = slot && nextReplica(route, slot, noneTried);
    if (!slot || !address) {
      refuseUpgrade(socket, 503, `cutover: route ${route.key} has no upstream address\n`);
      return;
    }
    this.lease = this.deps.inFlight.begin(route.key, slot, address);
    if (this.binding.kind === 'main') this.open = this.deps.metrics.opened(route.key, slot, this.arrivedMs);
    socket.once('close', () => this.finish());
    this.attempt(slot, address);
  }

  private attempt(slot: Slot, address: string): void {
    const { req, route } = this;
    this.slot = slot;
    if (this.open) this.open.slot = slot;
    this.tried.push(address);
    const target = parseHostPort(address);
    const { headers } = upstreamRequestHeaders(req, address);
    headers.push('connection', 'upgrade', 'upgrade', req.headers.upgrade ?? '');
    let connected = false;
    let timedOut = false;
    const upstream = request({
      host: target?.host,
      port: target?.port,
      method: req.method,
      path: req.url,
      headers,
      setHost: false,
      agent: false,
    });
    const timer = setTimeout(() => {
      timedOut = true;
      upstream.destroy();
    }, route.upstreamTimeoutMs);
    upstream.once('socket', (s: Socket) => s.once('connect', () => (connected = true)));
    this.socket.once('close', () => {
      if (!this.answered) upstream.destroy();
    });
    upstream.on('upgrade', (res: IncomingMessage, upstreamSocket: Socket, upstreamHead: Buffer) => {
      clearTimeout(timer);
      this.upgraded(res, upstreamSocket, upstreamHead, address);
    });
    upstream.on('response', (res: IncomingMessage) => {
      clearTimeout(timer);
      this.relay(res);
    });
    upstream.on('error', (error: Error) => {
      clearTimeout(timer);
      if (this.answered || this.socket.destroyed) return;
      if (!connected && !timedOut && this.tried.length < maxUpstreamAttempts) {
        const current = this.deps.currentRoute(route.key) ?? route;
        const next = failoverTarget(current, this.binding.kind, this.slot, new Set(this.tried));
        if (next) {
          this.lease?.move(next.slot, next.address);
          this.attempt(next.slot, next.address);
          return;
        }
      }
      this.answer(
        timedOut ? 504 : 502,
        `cutover: no upstream of route ${route.key} answered the upgrade (${this.tried.join(', ')}): ${timedOut ? `no answer for ${route.upstreamTimeoutMs / 1000}s` : error.message}\n`,
      );
    });
    upstream.end();
  }

  /** 101: the client hears it, and the two connections become one tunnel. */
  private upgraded(
    res: IncomingMessage,
    upstreamSocket: Socket,
    upstreamHead: Buffer,
    address: string,
  ): void {
    const { socket } = this;
    if (this.answered || socket.destroyed) {
      upstreamSocket.destroy();
      return;
    }
    this.answered = true;
    this.status = 101;
    let head = `HTTP/1.1 101 ${res.statusMessage || 'Switching Protocols'}\r\n`;
    const raw = res.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) head += `${raw[i]}: ${raw[i + 1]}\r\n`;
    socket.write(`${head}x-cutover-slot: ${this.slot}\r\n\r\n`, 'latin1');
    const websocket = (res.headers.upgrade ?? '').trim().toLowerCase() === 'websocket';
    const tunnel = new UpgradeTunnel(this.route.key, this.slot, address, socket, upstreamSocket, websocket);
    this.deps.upgrades.add(tunnel);
    this.finish();
    tunnel.start(this.head, upstreamHead);
  }

  /** Any other answer: a response as the upstream gave it, then the connection closes. */
  private relay(res: IncomingMessage): void {
    const { socket } = this;
    if (this.answered || socket.destroyed) {
      res.destroy();
      return;
    }
    this.answered = true;
    this.status = res.statusCode ?? 502;
    const headers: RawHeaders = clientResponseHeaders(res.rawHeaders, this.slot, true);
    let head = `HTTP/1.1 ${this.status} ${res.statusMessage ?? ''}\r\n`;
    for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
    socket.write(`${head}\r\n`, 'latin1');
    // Framed by its Content-Length when it had one, else by the close that follows.
    res.on('error', () => socket.destroy());
    res.pipe(socket);
  }

  private answer(status: number, text: string): void {
    this.answered = true;
    this.status = status;
    refuseUpgrade(this.socket, status, text);
  }

  /** The handshake is over (101, an answer, or the client gone): counted once. */
  private finish(): void {
    const lease = this.lease;
    if (!lease) return;
    this.lease = null;
    lease.release();
    if (this.open) this.deps.metrics.closed(this.route.key, this.open);
    if (this.binding.kind === 'main')
      this.deps.metrics.record(
        this.route.key,
        this.slot,
        this.status,
        performance.now() - this.arrivedMs,
        false,
      );
  }
}

function ignore(): void {}
