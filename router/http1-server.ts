import type { Server, Socket } from 'node:net';
import { Http1Connection, type Http1ServerSide } from './http1-connection.js';
import type { Http1Request, Http1Response } from './http1-exchange.js';

/** What the HTTP/1.1 side needs of its route listener (route-listeners.ts). */
export interface Http1Listener {
  readonly closing: boolean;
  responseClosed(): void;
}

export type Http1Handler = (connection: Http1Connection, req: Http1Request, res: Http1Response) => void;
export type Http1UpgradeHandler = (
  req: Http1Request,
  socket: import('node:net').Socket,
  head: Buffer,
) => void;

/**
 * The HTTP/1.1 side of a route listener: every connection `server` hands over on `event`
 * ('connection', or 'secureConnection' over TLS) is read by an Http1Connection of its own. Keeps
 * them, to close the idle ones when the listener goes away and cut the rest past its grace.
 */
export class Http1Side implements Http1ServerSide {
  private readonly connections = new Set<Http1Connection>();
  private dateText = '';
  private dateUntilMs = 0;

  constructor(
    server: Server,
    event: 'connection' | 'secureConnection',
    private readonly listener: Http1Listener,
    readonly keepAliveTimeoutMs: number,
    private readonly handler: Http1Handler,
    private readonly upgradeHandler?: Http1UpgradeHandler,
  ) {
    server.on(event, (socket: import('node:net').Socket) => {
      this.connections.add(new Http1Connection(socket, this));
    });
  }

  get closing(): boolean {
    return this.listener.closing;
  }

  /** The Date header's value, made once a second. */
  date(): string {
    const now = Date.now();
    if (now >= this.dateUntilMs) {
      this.dateText = new Date(now).toUTCString();
      this.dateUntilMs = now - (now % 1000) + 1000;
    }
    return this.dateText;
  }

  responseClosed(): void {
    this.listener.responseClosed();
  }

  handle(connection: Http1Connection, req: Http1Request, res: Http1Response): void {
    this.handler(connection, req, res);
  }

  handleUpgrade(req: Http1Request, socket: import('node:net').Socket, head: Buffer): void {
    if (this.upgradeHandler) this.upgradeHandler(req, socket, head);
    else socket.destroy();
  }

  forget(connection: Http1Connection): void {
    this.connections.delete(connection);
  }

  /** Closes every connection between two requests (not those handed over to an upgrade). */
  closeIdleConnections(): void {
    for (const connection of this.connections) connection.closeIfIdle();
  }

  /** The sockets handed over to an upgrade (a handshake under way, or a tunnel) still open. */
  upgradedSockets(): Socket[] {
    const sockets: Socket[] = [];
    for (const connection of this.connections)
      if (connection.handedOver && !connection.socket.destroyed) sockets.push(connection.socket);
    return sockets;
  }

  /** Cuts every connection. */
  closeAllConnections(): void {
    for (const connection of this.connections) connection.socket.destroy();
  }
}
