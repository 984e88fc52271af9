/**
 * Idle client keep-alive connections: the router keeps them as long as nginx does and says so, and
 * closing one never resets a request that already reached it. Fresh-clone CI runs failed writes on
 * reused connections: a write hold's burst of new connections fell idle together, and the router
 * (Node's 5 s, closing at 6 s) closed them as the next burst reused them — late under load, after
 * the requests had arrived.
 */
import { Agent } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { clientKeepAliveTimeoutMs } from '../../router/route-listeners.js';
import { countingUpstream, eventually, Resources, rawClient, routerWithRoute, send } from './support.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

/** A router whose route `web` sends to an upstream answering `ok`; where the route listens. */
async function routeTo(keepAliveTimeoutMs?: number): Promise<string> {
  const app = await countingUpstream(resources, (req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  const slots = { blue: [app.address], green: [], greenPercent: 0 };
  const options = keepAliveTimeoutMs === undefined ? {} : { keepAliveTimeoutMs };
  return (await routerWithRoute(resources, slots, options)).listen;
}

/** Blocks this process (the router's too) for `ms`: a router whose loop runs late. */
function busy(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // the router's timers fall due meanwhile, and the client's bytes wait unread
  }
}

describe('router: idle client keep-alive connections', () => {
  it("keeps them for nginx's 75 s and tells the client so", async () => {
    const listen = await routeTo();
    const agent = new Agent({ keepAlive: true });
    resources.add(() => agent.destroy());
    const answer = await send(listen, { agent });
    expect(answer.headers.connection).toBe('keep-alive');
    expect(answer.headers['keep-alive']).toBe(`timeout=${clientKeepAliveTimeoutMs / 1000}`);
    expect(clientKeepAliveTimeoutMs).toBe(75_000);
  });

  it('answers a request that reached an idle connection before the router, running late, closed it', async () => {
    const keepAliveTimeoutMs = 200;
    const listen = await routeTo(keepAliveTimeoutMs);
    const client = rawClient(resources, listen);
    const request = 'POST /put HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nk';
    client.socket.write(request);
    await eventually(() => client.received().includes('\r\n\r\nok'));
    client.clear();
    // The next request goes out while the connection is idle, then this process (the router with
    // it) is held past the idle deadline (Node's, plus the second it adds): when the loop runs
    // again the router's keep-alive timer is due, and the request's bytes are there, unread.
    await new Promise<void>((resolve) =>
      setImmediate(() => {
        client.socket.write(request);
        busy(keepAliveTimeoutMs + 1_500);
        resolve();
      }),
    );
    await eventually(
      () => client.received().includes('\r\n\r\nok') || client.error() !== '' || client.socket.destroyed,
      5_000,
    );
    // Before: the connection was destroyed with the request unread, and the client got a reset.
    expect({ error: client.error(), answer: client.received().split('\r\n')[0] }).toEqual({
      error: '',
      answer: 'HTTP/1.1 200 OK',
    });
  });

  it('still closes a connection that stays idle', async () => {
    const listen = await routeTo(200);
    const client = rawClient(resources, listen);
    client.socket.resume();
    client.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await eventually(() => client.closed(), 5_000);
  });
});
