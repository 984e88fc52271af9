/**
 * What a test started, stopped when it ends: servers, child processes, temporary directories. One
 * list per test file, emptied after each test (or once after the file), in reverse order.
 */
import { once } from 'node:events';
import type { Server, Socket } from 'node:net';
import { afterEach } from 'vitest';
import { tempDir } from './cli.js';

/** Everything a test started, stopped in reverse order by `cleanup()` (call it in afterEach). */
export class Resources {
  private readonly stops: (() => Promise<void> | void)[] = [];

  add(stop: () => Promise<void> | void): void {
    this.stops.push(stop);
  }

  /** A temporary directory, removed at cleanup. */
  async tempDir(prefix?: string): Promise<string> {
    const { dir, cleanup } = await tempDir(prefix);
    this.add(cleanup);
    return dir;
  }

  /**
   * Listens on a free port of 127.0.0.1; the server and every connection it holds are closed at
   * cleanup. Answers host:port.
   */
  async listen(server: Server): Promise<string> {
    const sockets = new Set<Socket>();
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    this.add(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    return `127.0.0.1:${(server.address() as { port: number }).port}`;
  }

  async cleanup(): Promise<void> {
    for (const stop of this.stops.splice(0).reverse()) {
      try {
        await stop();
      } catch {
        // keep cleaning up the rest
      }
    }
  }
}

/** A `Resources` cleaned up after each test of the file. */
export function resourcesPerTest(): Resources {
  const resources = new Resources();
  afterEach(() => resources.cleanup());
  return resources;
}
