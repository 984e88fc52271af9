/**
 * Many WebSocket clients through a route, as an app's clients behave: each sends a message and
 * waits for its echo, again and again; a connection closed with 1001 (going away) is opened again at
 * once and its unanswered message sent there. Everything else is a failure: an error, another
 * close code, an echo from another version than the one that greeted the connection (the wrong
 * slot), an echo out of order.
 */
import { WebSocket } from 'ws';

/** One connection of a client: the version that greeted it, and how it ended. */
export interface FleetConnection {
  version: string;
  openedAt: number;
  closedAt?: number;
  code?: number;
  echoes: number;
}

export interface FleetResult {
  connections: FleetConnection[];
  /** Echoes answered, over all connections. */
  echoes: number;
  /** What went wrong, one line each. */
  failures: string[];
  /** Messages unanswered when a 1001 came, sent again on the next connection. */
  resent: number;
}

export class WsFleet {
  private running = true;
  private readonly connections: FleetConnection[] = [];
  private readonly failures: string[] = [];
  private readonly open = new Set<WebSocket>();
  private resent = 0;

  constructor(
    private readonly url: string,
    size: number,
    private readonly intervalMs: number,
  ) {
    for (let i = 0; i < size; i++) this.connect(i, 0, null);
  }

  /** Connections open now, by the version that greeted them. */
  openByVersion(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const c of this.connections)
      if (c.closedAt === undefined && c.version !== '') counts[c.version] = (counts[c.version] ?? 0) + 1;
    return counts;
  }

  async stop(): Promise<FleetResult> {
    this.running = false;
    await Promise.all(
      [...this.open].map(
        (socket) =>
          new Promise<void>((resolve) => {
            socket.once('close', () => resolve());
            socket.close(1000, 'test over');
          }),
      ),
    );
    return {
      connections: this.connections,
      echoes: this.connections.reduce((sum, c) => sum + c.echoes, 0),
      failures: this.failures,
      resent: this.resent,
    };
  }

  /** Client `id`'s next connection; `pending`: a message it still waits an echo for. */
  private connect(id: number, next: number, pending: string | null): void {
    const socket = new WebSocket(this.url);
    const connection: FleetConnection = { version: '', openedAt: Date.now(), echoes: 0 };
    this.connections.push(connection);
    this.open.add(socket);
    let waitingFor = pending;
    let counter = next;
    let timer: NodeJS.Timeout | undefined;
    const send = () => {
      waitingFor ??= `c${id} m${counter++}`;
      socket.send(waitingFor);
    };
    socket.on('message', (data) => {
      const text = String(data);
      if (connection.version === '') {
        connection.version = /^hello (\S+)/.exec(text)?.[1] ?? '?';
        if (waitingFor !== null) this.resent++;
        send();
        return;
      }
      if (text !== `${connection.version}:${waitingFor}`) {
        this.failures.push(`client ${id}: sent ${waitingFor} on ${connection.version}, got ${text}`);
        return;
      }
      connection.echoes++;
      waitingFor = null;
      if (this.running) timer = setTimeout(send, this.intervalMs);
    });
    socket.on('unexpected-response', (_req, res) => {
      this.failures.push(`client ${id}: handshake answered ${res.statusCode}`);
    });
    socket.on('error', (error) => {
      if (this.running) this.failures.push(`client ${id}: ${error.message}`);
    });
    socket.on('close', (code) => {
      clearTimeout(timer);
      this.open.delete(socket);
      connection.closedAt = Date.now();
      connection.code = code;
      if (!this.running) return;
      if (code === 1001) this.connect(id, counter, waitingFor);
      else this.failures.push(`client ${id}: closed with ${code} on ${connection.version}`);
    });
  }
}
