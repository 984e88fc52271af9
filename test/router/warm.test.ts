import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { clientResponseHeaders, upstreamRequestHeaders } from '../../router/forward-headers.js';
import { upstreamWarmConnections } from '../../router/upstream-pool.js';
import { countingUpstream, eventually, resourcesPerTest, routerWithRoute, send } from './support.js';

const resources = resourcesPerTest();

/** An upstream that answers its name and counts the connections it accepted and still holds. */
const namedUpstream = (name: string) =>
  countingUpstream(resources, (req, res) => {
    req.resume();
    req.on('end', () => res.end(name));
  });

describe('router: upstream connections kept ready', () => {
  it('opens connections ahead to a slot at 0%, and a switch to it uses them', async () => {
    const [blue, green] = await Promise.all([namedUpstream('blue'), namedUpstream('green')]);
    const { listen, split, router } = await routerWithRoute(resources, {
      blue: [blue.address],
      green: [green.address],
      greenPercent: 100,
    });
    await eventually(() => blue.open() >= upstreamWarmConnections);

    await split(0);
    await router.reload();
    const accepted = blue.accepted();
    const answers = await Promise.all(Array.from({ length: upstreamWarmConnections }, () => send(listen)));
    expect(answers.map((a) => a.body)).toEqual(Array(upstreamWarmConnections).fill('blue'));
    expect(blue.accepted()).toBe(accepted);
  });

  it('loses no request when the upstream closed the spare connections', async () => {
    const blue = await namedUpstream('blue');
    const { listen } = await routerWithRoute(resources, { blue: [blue.address], green: [], greenPercent: 0 });
    await eventually(() => blue.open() >= upstreamWarmConnections);
    for (let round = 0; round < 5; round++) {
      blue.dropIdle();
      const answers = await Promise.all([send(listen), send(listen, { method: 'POST', body: 'x' })]);
      expect(answers.map((a) => [a.status, a.body])).toEqual([
        [200, 'blue'],
        [200, 'blue'],
      ]);
    }
  });
});

describe('router: forwarded headers', () => {
  const message = (rawHeaders: string[], remoteAddress = '10.0.0.9') =>
    ({ rawHeaders, socket: { remoteAddress } }) as unknown as IncomingMessage;

  it('drops hop-by-hop headers and those Connection names; appends the client to X-Forwarded-For', () => {
    const { headers, body } = upstreamRequestHeaders(
      message([
        'Host',
        'example.test',
        'Connection',
        'keep-alive, X-Secret',
        'X-Secret',
        'a',
        'Keep-Alive',
        'timeout=5',
        'TE',
        'trailers',
        'X-Forwarded-For',
        '1.1.1.1',
        'x-forwarded-for',
        '2.2.2.2',
        'Accept',
        '*/*',
      ]),
      '127.0.0.1:9000',
    );
    expect(body).toBe('none');
    expect(headers).toEqual([
      'Host',
      'example.test',
      'Accept',
      '*/*',
      'x-forwarded-for',
      '1.1.1.1, 2.2.2.2, 10.0.0.9',
      'x-forwarded-proto',
      'http',
      'x-forwarded-host',
      'example.test',
    ]);
  });

  it('tells how a request body is framed, and names the upstream as Host when the client sent none', () => {
    expect(upstreamRequestHeaders(message(['Content-Length', '0']), 'u:1').body).toBe('none');
    expect(upstreamRequestHeaders(message(['Content-Length', '12']), 'u:1').body).toBe('length');
    const chunked = upstreamRequestHeaders(message(['Transfer-Encoding', 'chunked']), 'u:1');
    expect(chunked.body).toBe('chunked');
    expect(chunked.headers).toEqual([
      'Transfer-Encoding',
      'chunked',
      'x-forwarded-for',
      '10.0.0.9',
      'x-forwarded-proto',
      'http',
      'host',
      'u:1',
    ]);
  });

  it('keeps repeated response headers, drops framing and hop-by-hop ones, names the slot', () => {
    const headers = clientResponseHeaders(
      [
        'Set-Cookie',
        'a=1',
        'Set-Cookie',
        'b=2',
        'Transfer-Encoding',
        'chunked',
        'Connection',
        'keep-alive',
        'Keep-Alive',
        'timeout=5',
      ],
      'green',
      true,
    );
    expect(headers).toEqual([
      'Set-Cookie',
      'a=1',
      'Set-Cookie',
      'b=2',
      'x-cutover-slot',
      'green',
      'connection',
      'close',
    ]);
  });
});
