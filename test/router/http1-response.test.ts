import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { maxResponseHeadBytes, ResponseParseError, ResponseParser } from '../../router/http1-response.js';
import { resourcesPerTest } from './support.js';

interface Parsed {
  status: number;
  reason: string;
  headers: string[];
  body: string;
}

/** A parser that collects every complete response it reads. */
function collectingParser(): { parser: ResponseParser; responses: Parsed[] } {
  const responses: Parsed[] = [];
  let current: Parsed | null = null;
  const parser = new ResponseParser({
    responseHead(status, reason, headers) {
      current = { status, reason, headers, body: '' };
    },
    responseBody(chunk, last) {
      if (!current) throw new Error('body before head');
      current.body += chunk.toString('latin1');
      if (last) {
        responses.push(current);
        current = null;
      }
    },
  });
  return { parser, responses };
}

/**
 * Feeds responses to one parser as a connection would: each response's bytes (`wires[i]`, cut where
 * `cuts` says) after its request went out (HEAD where `heads[i]`). The router never pipelines, so a
 * response's bytes never share a read with the next one's.
 */
function parse(wires: Buffer[], heads: boolean[], options: { cuts?: number[]; closeAtEnd?: boolean } = {}) {
  const { parser, responses } = collectingParser();
  const cuts = options.cuts ?? [Number.MAX_SAFE_INTEGER];
  let cut = 0;
  wires.forEach((wire, i) => {
    parser.expect(heads[i] ?? false);
    for (let offset = 0; offset < wire.length; ) {
      const size = cuts[cut++ % cuts.length] as number;
      parser.execute(wire.subarray(offset, offset + size));
      offset += size;
    }
    if (i < wires.length - 1) expect(parser.complete).toBe(true);
  });
  const ended = options.closeAtEnd ? parser.end() : parser.complete;
  return { responses, ended, keepAlive: parser.keepAlive };
}

const tokenChars = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~');
const headerName = fc
  .string({ unit: tokenChars, minLength: 1, maxLength: 12 })
  .filter((n) => !['content-length', 'transfer-encoding', 'connection'].includes(n.toLowerCase()));
const headerValue = fc
  .string({ unit: fc.constantFrom(...'abc XYZ019,;=/"\t\u00e9'), maxLength: 20 })
  .map((v) => v.trim());
const bodyText = fc.string({ unit: fc.constantFrom(...'ab\r\n0;x\u00ff'), maxLength: 300 });

const responseArbitrary = fc.record({
  status: fc.constantFrom(200, 201, 204, 304, 404, 500, 503),
  reason: fc.constantFrom('', 'OK', 'Not Found', 'Some Reason'),
  headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 5 }),
  body: bodyText,
  framing: fc.constantFrom('length', 'chunked'),
  chunkSizes: fc.array(fc.integer({ min: 1, max: 50 }), { maxLength: 8 }),
  extension: fc.boolean(),
  trailers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 2 }),
  interim: fc.constantFrom(null, 100, 103),
  head: fc.boolean(),
});
type GeneratedResponse = typeof responseArbitrary extends fc.Arbitrary<infer T> ? T : never;

function serialize(r: GeneratedResponse): { wire: string; expected: Parsed } {
  const bodiless = r.head || r.status === 204 || r.status === 304;
  const body = bodiless ? '' : r.body;
  const headers: string[] = r.headers.flat();
  let wire = r.interim ? `HTTP/1.1 ${r.interim} Interim\r\nLink: </x>\r\n\r\n` : '';
  if (r.framing === 'length') headers.push('Content-Length', String(r.head ? r.body.length : body.length));
  else headers.push('Transfer-Encoding', 'chunked');
  wire += `HTTP/1.1 ${r.status}${r.reason ? ` ${r.reason}` : ''}\r\n`;
  for (let i = 0; i < headers.length; i += 2) wire += `${headers[i]}: ${headers[i + 1]}\r\n`;
  wire += '\r\n';
  if (!bodiless) {
    if (r.framing === 'length') wire += body;
    else {
      let rest = body;
      for (const size of r.chunkSizes) {
        if (rest === '') break;
        const piece = rest.slice(0, size);
        rest = rest.slice(size);
        wire += `${piece.length.toString(16)}${r.extension ? ';name=value' : ''}\r\n${piece}\r\n`;
      }
      if (rest !== '') wire += `${rest.length.toString(16)}\r\n${rest}\r\n`;
      wire += '0\r\n';
      for (const [name, value] of r.trailers) wire += `${name}: ${value}\r\n`;
      wire += '\r\n';
    }
  }
  return { wire, expected: { status: r.status, reason: r.reason, headers, body } };
}

describe('router: HTTP/1.1 response parser', () => {
  it('reads any sequence of responses on one connection, however the bytes are split', () => {
    fc.assert(
      fc.property(
        fc.array(responseArbitrary, { minLength: 1, maxLength: 4 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 40 }),
        (generated, cuts) => {
          const serialized = generated.map(serialize);
          const parsed = parse(
            serialized.map((s) => Buffer.from(s.wire, 'latin1')),
            generated.map((g) => g.head),
            { cuts },
          );
          expect(parsed.responses).toEqual(serialized.map((s) => s.expected));
          expect(parsed.ended).toBe(true);
          expect(parsed.keepAlive).toBe(true);
        },
      ),
    );
  });

  it('reads a body delimited by the close, and reports a close before the end as a cut', () => {
    const wire = Buffer.from('HTTP/1.1 200 OK\r\nX: y\r\n\r\nall of it', 'latin1');
    const closed = parse([wire], [false], { closeAtEnd: true });
    expect(closed.responses).toEqual([{ status: 200, reason: 'OK', headers: ['X', 'y'], body: 'all of it' }]);
    expect(closed.ended).toBe(true);
    expect(closed.keepAlive).toBe(false);

    const cut = parse([Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort')], [false], {
      closeAtEnd: true,
    });
    expect(cut.ended).toBe(false);
    const chunkedCut = parse(
      [Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n')],
      [false],
      {
        closeAtEnd: true,
      },
    );
    expect(chunkedCut.ended).toBe(false);
  });

  it('keeps the connection only when the response allows it', () => {
    const keep = (head: string) =>
      parse([Buffer.from(`${head}Content-Length: 0\r\n\r\n`, 'latin1')], [false]).keepAlive;
    expect(keep('HTTP/1.1 200 OK\r\n')).toBe(true);
    expect(keep('HTTP/1.1 200 OK\r\nConnection: close\r\n')).toBe(false);
    expect(keep('HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\n')).toBe(false);
    expect(keep('HTTP/1.0 200 OK\r\n')).toBe(false);
    expect(keep('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n')).toBe(true);
  });

  it('keeps a complete response when bytes follow it, and never reuses that connection', () => {
    const extra = parse([Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\r\n')], [false]);
    expect(extra.responses.map((r) => r.body)).toEqual(['ok']);
    expect(extra.ended).toBe(true);
    expect(extra.keepAlive).toBe(false);
  });

  it('trims only spaces and tabs from values, and forwards a repeated Content-Length once', () => {
    // "à" in UTF-8 is C3 A0; read as latin1 the A0 is a no-break space, which String.trim drops.
    const utf8 = Buffer.concat([
      Buffer.from('HTTP/1.1 200 OK\r\nX-Name: \tvoil'),
      Buffer.from('à', 'utf8'),
      Buffer.from(' \r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok'),
    ]);
    const [response] = parse([utf8], [false]).responses;
    expect(Buffer.from(response?.headers[1] ?? '', 'latin1').toString('utf8')).toBe('voilà');
    expect(response?.headers).toEqual(['X-Name', response?.headers[1], 'Content-Length', '2']);
  });

  it('refuses what could split or merge responses, with a message naming the problem', () => {
    const refuse = (wire: string) => {
      const parser = new ResponseParser({ responseHead() {}, responseBody() {} });
      parser.expect(false);
      try {
        parser.execute(Buffer.from(wire, 'latin1'));
      } catch (error) {
        expect(error).toBeInstanceOf(ResponseParseError);
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(refuse('HTTP/2 200 OK\r\n\r\n')).toMatch(/status line is not HTTP\/1\.x/);
    expect(refuse('HTTP/1.1 20 OK\r\n\r\n')).toMatch(/status line/);
    expect(refuse('HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n')).toMatch(/bare line feed/);
    // Never completed by a CRLFCRLF: refused as soon as the bare LF is seen, not left waiting.
    expect(refuse('HTTP/1.1 200 OK\nContent-Length: 0\n\n')).toMatch(/response head .* bare line feed/);
    expect(refuse('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n')).toMatch(/Transfer-Encoding "gzip"/);
    expect(refuse('HTTP/1.1 200 OK\r\nno colon here\r\n\r\n')).toMatch(/malformed header line/);
    expect(refuse('HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n')).toMatch(/malformed header line/);
    expect(refuse('HTTP/1.1 200 OK\r\nBad Name: a\r\n\r\n')).toMatch(/malformed header line/);
    expect(refuse('HTTP/1.1 200 OK\r\nX: a\nY: b\r\n\r\n')).toMatch(/bare line feed/);
    expect(refuse('HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n')).toMatch(/Content-Length/);
    expect(refuse('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx')).toMatch(
      /Content-Length "2"/,
    );
    expect(refuse('HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n')).toMatch(/Content-Length/);
    expect(refuse('HTTP/1.1 200 OK\r\nContent-Length: \x0b2\x0c\r\n\r\n')).toMatch(/control character/);
    expect(
      refuse(
        'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
      ),
    ).toMatch(/both Transfer-Encoding and Content-Length/);
    expect(refuse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a\nb\r\nok\r\n0\r\n\r\n')).toMatch(
      /chunk size/,
    );
    expect(
      refuse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX: a\nY\r\n\r\n'),
    ).toMatch(/trailer section .* bare line feed/);
    expect(refuse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')).toMatch(/chunk size/);
    expect(refuse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n')).toMatch(
      /longer than its size/,
    );
    expect(refuse('HTTP/1.1 101 Switching Protocols\r\n\r\n')).toMatch(/switched protocols/);
    expect(refuse(`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(maxResponseHeadBytes)}`)).toMatch(/over 65536 bytes/);
    // The same responses, well-formed, pass.
    expect(refuse('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx')).toBe('accepted');
  });

  it('finds a bare line feed in a head or trailer section wherever the reads split it, and only then', () => {
    /** What the parser makes of `wire` read in two pieces, split at `at`. */
    const verdict = (wire: string, at: number) => {
      const parser = new ResponseParser({ responseHead() {}, responseBody() {} });
      parser.expect(false);
      const bytes = Buffer.from(wire, 'latin1');
      try {
        parser.execute(bytes.subarray(0, at));
        parser.execute(bytes.subarray(at));
      } catch (error) {
        return /bare line feed/.test((error as Error).message) ? 'bare LF' : (error as Error).message;
      }
      return 'accepted';
    };
    const wires = {
      'HTTP/1.1 200 OK\r\nX-A: a\nX-B: b\r\nContent-Length: 0\r\n\r\n': 'bare LF',
      'HTTP/1.1 200 OK\r\nX-A: a\r\nX-B: b\r\nContent-Length: 0\r\n\n': 'bare LF',
      'HTTP/1.1 200 OK\r\nX-A: a\r\nX-B: b\r\nContent-Length: 0\r\n\r\n': 'accepted',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX: a\nY: b\r\n\r\n': 'bare LF',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\n': 'bare LF',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX: a\r\n\r\n': 'accepted',
    };
    for (const [wire, expected] of Object.entries(wires))
      for (let at = 0; at <= wire.length; at++) expect([at, verdict(wire, at)]).toEqual([at, expected]);
  });

  it('reads what a real Node.js server writes: chunked, fixed length, HEAD, 204, 304, 100 and 103', async () => {
    const server = createServer((req, res: ServerResponse) => {
      const path = req.url ?? '/';
      if (path === '/chunked') {
        res.write('one,');
        setTimeout(() => res.end('two'), 5);
      } else if (path === '/length') res.end('fixed');
      else if (path === '/204') res.writeHead(204).end();
      else if (path === '/304') res.writeHead(304, { etag: '"x"' }).end();
      else if (path === '/hints') {
        res.writeEarlyHints({ link: '</style.css>; rel=preload' });
        res.end('after hints');
      } else if (path === '/continue') {
        res.writeContinue();
        res.end('after continue');
      } else {
        res.setHeader('set-cookie', ['a=1', 'b=2']);
        res.end('head');
      }
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    resources.add(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const port = (server.address() as { port: number }).port;
    const requests: [string, string][] = [
      ['GET', '/chunked'],
      ['GET', '/length'],
      ['HEAD', '/cookies'],
      ['GET', '/204'],
      ['GET', '/304'],
      ['GET', '/hints'],
      ['GET', '/continue'],
    ];
    const { parser, responses: results } = collectingParser();
    const socket = connect(port, '127.0.0.1');
    resources.add(() => {
      socket.destroy();
    });
    await once(socket, 'connect');
    for (const [method, path] of requests) {
      parser.expect(method === 'HEAD');
      const done = results.length + 1;
      socket.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      while (results.length < done) parser.execute((await once(socket, 'data'))[0] as Buffer);
      expect(parser.keepAlive).toBe(true);
    }
    const summary = results.map((r) => [r.status, r.body]);
    expect(summary).toEqual([
      [200, 'one,two'],
      [200, 'fixed'],
      [200, ''],
      [204, ''],
      [304, ''],
      [200, 'after hints'],
      [200, 'after continue'],
    ]);
    const cookies = results[2]?.headers.filter((_, i, all) => all[i - 1]?.toLowerCase() === 'set-cookie');
    expect(cookies).toEqual(['a=1', 'b=2']);
  });
});

const resources = resourcesPerTest();
