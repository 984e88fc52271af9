import type { Socket } from 'node:net';
import type { Slot } from './routing-state.js';
import { closeFrame, FrameTracker, goingAwayCode } from './websocket-frames.js';

/** Idle upgraded connections are probed by TCP keep-alive this often, so a vanished peer is noticed. */
const tunnelKeepAliveMs = 60_000;

/** Who ended an upgraded connection: one of its sides, or the router (a drain past its timeout). */
export type TunnelEnd = 'client' | 'upstream' | 'router';

/**
 * Why the router closes an upgraded connection (the reason of its close frame 1001): a drain of
 * its slot, or its listener going away (its route left the table or moved, or the router stops).
 */
export type TunnelCloseCause = 'drain' | 'listener';

const closeReasons: Record<TunnelCloseCause, string> = {
  drain: 'going away: the router drains this slot',
  listener: 'going away: the router no longer listens here',
};

/**
 * One upgraded connection (a WebSocket, or any protocol a 101 switched to): the client's socket and
 * the upstream's, bytes piped both ways with backpressure, half-closes passed on. It stays on the
 * upstream its handshake reached, whatever the routing table does after.
 *
 * `close()` ends it cleanly, for a drain or its listener going away: a WebSocket gets a close frame
 * 1001 (going away) on each side, put between two frames of the stream (a frame under way is
 * forwarded to its end first), then nothing more is forwarded; each side's answering close frame
 * ends its TCP connection. Another protocol's connections are ended (FIN) both ways. Whatever is
 * left after `graceMs` is cut.
 *
 * Invariants: the router's own close frame goes to a side at most once, and only at a frame
 * boundary of the stream to that side; once it went, nothing else is forwarded to that side.
 */
export class UpgradeTunnel {
  /** Client → upstream and upstream → client frames (WebSocket only). */
  private readonly toUpstream: FrameTracker | null;
  private readonly toClient: FrameTracker | null;
  private closing = false;
  private sentToClient = false;
  private sentToUpstream = false;
  private open = 2;
  private cut: NodeJS.Timeout | null = null;
  /** Who ended it first, once it ends. */
  endedBy: TunnelEnd | null = null;
  readonly ended: Promise<void>;
  private resolveEnded!: () => void;
  private reason = closeReasons.drain;

  constructor(
    readonly routeKey: string,
    readonly slot: Slot,
    readonly address: string,
    readonly client: Socket,
    private readonly upstream: Socket,
    readonly websocket: boolean,
  ) {
    this.toUpstream = websocket ? new FrameTracker() : null;
    this.toClient = websocket ? new FrameTracker() : null;
    this.ended = new Promise((resolve) => {
      this.resolveEnded = resolve;
    });
  }

  /** Starts piping; `clientHead`/`upstreamHead`: bytes each side sent past the handshake. */
  start(clientHead: Buffer, upstreamHead: Buffer): void {
    const { client, upstream } = this;
    for (const socket of [client, upstream]) {
      socket.setTimeout(0);
      socket.setNoDelay(true);
      socket.setKeepAlive(true, tunnelKeepAliveMs);
      socket.once('close', () => this.sideClosed(socket));
    }
    client.on('error', () => this.fail('client'));
    upstream.on('error', () => this.fail('upstream'));
    // A side's FIN is passed on (its peer may still answer: half-close).
    client.on('end', () => {
      this.endedBy ??= 'client';
      upstream.end();
    });
    upstream.on('end', () => {
      this.endedBy ??= 'upstream';
      client.end();
    });
    client.on('data', (chunk: Buffer) => this.fromClient(chunk));
    upstream.on('data', (chunk: Buffer) => this.fromUpstream(chunk));
    if (upstreamHead.length > 0) this.fromUpstream(upstreamHead);
    if (clientHead.length > 0) this.fromClient(clientHead);
    client.resume();
    upstream.resume();
  }

  /** The connection is open and neither side began to close it. */
  get idle(): boolean {
    return !this.closing && this.endedBy === null && !this.toClient?.closeSeen && !this.toUpstream?.closeSeen;
  }

  /** Ends the connection cleanly (see the class); resolves once both sockets are closed. */
  close(graceMs: number, cause: TunnelCloseCause): Promise<void> {
    if (this.closing || this.open === 0) return this.ended;
    this.closing = true;
    this.reason = closeReasons[cause];
    const began = this.toClient?.closeSeen || this.toUpstream?.closeSeen;
    if (!this.websocket || began || this.endedBy !== null) {
      // Not a WebSocket, or a side already closing it: its own handshake (or FIN) goes on.
      if (!this.websocket) {
        this.endedBy ??= 'router';
        this.client.end();
        this.upstream.end();
      }
    } else {
      this.endedBy = 'router';
      if (this.toClient?.atBoundary) this.sendClose('client');
      if (this.toUpstream?.atBoundary) this.sendClose('upstream');
    }
    this.cut = setTimeout(() => {
      this.client.destroy();
      this.upstream.destroy();
    }, graceMs);
    this.cut.unref();
    return this.ended;
  }

  private fromClient(chunk: Buffer): void {
    const tracker = this.toUpstream;
    if (!tracker) {
      this.pass(chunk, this.upstream, this.client);
      return;
    }
    if (!this.closing) {
      tracker.advance(chunk);
      this.pass(chunk, this.upstream, this.client);
      return;
    }
    if (!this.sentToUpstream) {
      const n = tracker.advance(chunk, true);
      if (n > 0) this.pass(chunk.subarray(0, n), this.upstream, this.client);
      if (tracker.atBoundary) {
        this.sendClose('upstream');
        if (n < chunk.length) tracker.advance(chunk.subarray(n));
      }
    } else tracker.advance(chunk);
    // The client answered the router's close: as the server of that connection, the router ends it.
    if (this.sentToClient && tracker.closeSeen) this.client.end();
  }

  private fromUpstream(chunk: Buffer): void {
    const tracker = this.toClient;
    if (!tracker) {
      this.pass(chunk, this.client, this.upstream);
      return;
    }
    if (!this.closing) {
      tracker.advance(chunk);
      this.pass(chunk, this.client, this.upstream);
      return;
    }
    if (!this.sentToClient) {
      const n = tracker.advance(chunk, true);
      if (n > 0) this.pass(chunk.subarray(0, n), this.client, this.upstream);
      if (tracker.atBoundary) {
        this.sendClose('client');
        if (n < chunk.length) tracker.advance(chunk.subarray(n));
      }
    } else tracker.advance(chunk);
    if (this.sentToUpstream && tracker.closeSeen) this.upstream.end();
  }

  private sendClose(side: 'client' | 'upstream'): void {
    const { reason } = this;
    if (side === 'client') {
      this.sentToClient = true;
      if (this.client.writable) this.client.write(closeFrame(goingAwayCode, reason, false));
    } else {
      this.sentToUpstream = true;
      if (this.upstream.writable) this.upstream.write(closeFrame(goingAwayCode, reason, true));
    }
  }

  /** Writes with backpressure: `from` pauses until `to` drains. */
  private pass(chunk: Buffer, to: Socket, from: Socket): void {
    if (!to.writable) return;
    if (!to.write(chunk) && !from.isPaused()) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  }

  private fail(side: TunnelEnd): void {
    this.endedBy ??= side;
    this.client.destroy();
    this.upstream.destroy();
  }

  private sideClosed(socket: Socket): void {
    // One side gone for good: the other is ended, and cut if it lingers.
    const other = socket === this.client ? this.upstream : this.client;
    if (!other.destroyed) {
      other.end();
      setTimeout(() => other.destroy(), 2_000).unref();
    }
    if (--this.open > 0) return;
    if (this.cut) clearTimeout(this.cut);
    this.resolveEnded();
  }
}
