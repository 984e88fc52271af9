/**
 * The router's own request reader (request-head.ts, chunked-request-body.ts): malformed heads are
 * refused with the status nginx's bar asks for, and any split of the same bytes over reads gives
 * the same requests, bodies and verdicts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChunkedDecoder } from '../../router/chunked-request-body.js';
import { maxRequestHeadBytes } from '../../router/request-checks.js';
import { type HeadResult, type RequestHead, RequestHeadParser } from '../../router/request-head.js';

function parse(text: string): HeadResult {
  return new RequestHeadParser().read(Buffer.from(text, 'latin1'), 0);
}

function statusOf(text: string): number | 'head' | 'partial' {
  const result = parse(text);
  if (result.kind === 'refused') return result.refusal.status;
  return result.kind;
}

function headOf(text: string): RequestHead {
  const result = parse(text);
  if (result.kind !== 'head') throw new Error(`not a head: ${JSON.stringify(result)}`);
  return result.head;
}

/** What a connection reads from `chunks`: each request's line, headers and body, or the fault that stopped it. */
function readAll(chunks: Buffer[]): string[] {
  const out: string[] = [];
  const parser = new RequestHeadParser();
  let buffer = Buffer.alloc(0);
  let offset = 0;
  let head: RequestHead | null = null;
  let lengthLeft = 0;
  let decoder: ChunkedDecoder | null = null;
  let body: Buffer[] = [];
  const finish = () => {
    out.push(
      `${head?.method} ${head?.url} ${JSON.stringify(head?.rawHeaders)} ${Buffer.concat(body).toString('latin1')}`,
    );
    head = null;
    body = [];
  };
  for (const chunk of chunks) {
    buffer = Buffer.concat([buffer.subarray(offset), chunk]);
    offset = 0;
    for (;;) {
      if (head === null) {
        const result = parser.read(buffer, offset);
        if (result.kind === 'partial') break;
        if (result.kind === 'refused') {
          out.push(`refused ${result.refusal.status}`);
          return out;
        }
        head = result.head;
        offset = result.end;
        if (head.body.kind === 'length') lengthLeft = head.body.bytes;
        else if (head.body.kind === 'chunked') decoder = new ChunkedDecoder();
        else {
          finish();
          continue;
        }
      }
      if (decoder) {
        const start = offset;
        const read = decoder.read(buffer, start, buffer.length, (from, to) =>
          body.push(buffer.subarray(from, to)),
        );
        if (read.error) {
          out.push(`body refused: ${read.error}`);
          return out;
        }
        offset = start + read.used;
        if (!read.done) break;
        decoder = null;
        finish();
      } else {
        const take = Math.min(lengthLeft, buffer.length - offset);
        body.push(buffer.subarray(offset, offset + take));
        offset += take;
        lengthLeft -= take;
        if (lengthLeft > 0) break;
        finish();
      }
    }
  }
  if (head !== null) out.push('cut');
  return out;
}

function splitAt(bytes: Buffer, points: number[]): Buffer[] {
  const sorted = [...new Set(points)].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let last = 0;
  for (const point of sorted) {
    chunks.push(bytes.subarray(last, point));
    last = point;
  }
  chunks.push(bytes.subarray(last));
  return chunks;
}

const pipelined = Buffer.from(
  'GET /a HTTP/1.1\r\nHost: shop\r\nX-A:  padded \t \r\n\r\n' +
    'POST /b HTTP/1.1\r\nHost: shop\r\nContent-Length: 5\r\n\r\nhello' +
    'POST /c HTTP/1.1\r\nHost: shop\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2;q="x\\"y"\r\nde\r\n0\r\nTrailer-A: t\r\n\r\n' +
    '\r\nGET /d HTTP/1.0\r\n\r\n',
  'latin1',
);

describe('router: its request head reader', () => {
  it('reads a request line, its headers (values without the spaces around them) and its framing', () => {
    const head = headOf('POST /x?y=1 HTTP/1.1\r\nHost: shop\r\nContent-Length: 12\r\nX-A: \t a b \r\n\r\n');
    expect(head).toMatchObject({
      method: 'POST',
      url: '/x?y=1',
      httpVersionMajor: 1,
      httpVersionMinor: 1,
      rawHeaders: ['Host', 'shop', 'Content-Length', '12', 'X-A', 'a b'],
      body: { kind: 'length', bytes: 12 },
      keepAlive: true,
      upgrade: false,
      expect: null,
    });
  });

  it('reads keep-alive, upgrade and Expect as Node did', () => {
    expect(headOf('GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n').keepAlive).toBe(false);
    expect(headOf('GET / HTTP/1.0\r\n\r\n').keepAlive).toBe(false);
    expect(headOf('GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n').keepAlive).toBe(true);
    expect(
      headOf('GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n')
        .upgrade,
    ).toBe(true);
    expect(headOf('GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n').upgrade).toBe(false);
    expect(
      headOf('POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n').expect,
    ).toBe('100-continue');
  });

  it.each([
    ['bare LF after the request line', 'GET / HTTP/1.1\nHost: a\r\n\r\n', 400],
    ['bare LF after a header', 'GET / HTTP/1.1\r\nHost: a\n\r\n', 400],
    ['bare LF ending the head', 'GET / HTTP/1.1\r\nHost: a\r\n\n', 400],
    ['a CR alone in a value', 'GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n', 400],
    ['obs-fold', 'GET / HTTP/1.1\r\nHost: a\r\nX-A: a\r\n b\r\n\r\n', 400],
    ['obs-fold as the first header line', 'GET / HTTP/1.1\r\n X-A: a\r\nHost: a\r\n\r\n', 400],
    ['whitespace before the colon', 'GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n', 400],
    ['a header name that is not a token', 'GET / HTTP/1.1\r\nHost: a\r\nX@A: 1\r\n\r\n', 400],
    ['a control character in a value', 'GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x01\r\n\r\n', 400],
    [
      'two Content-Length',
      'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n',
      400,
    ],
    ['a Content-Length list', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n', 400],
    ['a signed Content-Length', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n', 400],
    ['a Content-Length ending in a tab', 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\t\r\n\r\n', 400],
    [
      'Transfer-Encoding and Content-Length',
      'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n',
      400,
    ],
    [
      'chunked before another coding',
      'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n',
      400,
    ],
    ['chunked twice', 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n', 400],
    ['an unknown method', 'BREW / HTTP/1.1\r\nHost: a\r\n\r\n', 400],
    ['two spaces in the request line', 'GET  / HTTP/1.1\r\nHost: a\r\n\r\n', 400],
    ['a raw non-ASCII target', 'GET /\xe9 HTTP/1.1\r\nHost: a\r\n\r\n', 400],
    ['HTTP/1.2', 'GET / HTTP/1.2\r\nHost: a\r\n\r\n', 400],
    ['HTTP/0.9 without a version', 'GET /\r\n', 400],
    ['HTTP/1.1 without Host', 'GET / HTTP/1.1\r\n\r\n', 400],
    ['a request line over 8 KiB', `GET /${'a'.repeat(8200)} HTTP/1.1\r\nHost: a\r\n\r\n`, 414],
    ['a header line over 8 KiB', `GET / HTTP/1.1\r\nHost: a\r\nX-A: ${'a'.repeat(8190)}\r\n\r\n`, 431],
    [
      'a head over its bound',
      `GET / HTTP/1.1\r\nHost: a\r\n${`X-A: ${'a'.repeat(8000)}\r\n`.repeat(5)}\r\n`,
      431,
    ],
    ['more than 500 header fields', `GET / HTTP/1.1\r\nHost: a\r\n${'X-A: 1\r\n'.repeat(501)}\r\n`, 431],
  ])('refuses %s', (_name, text, status) => {
    expect(statusOf(text)).toBe(status);
  });

  it('refuses what cannot become a request line before it ends (a TLS ClientHello), and waits for what can', () => {
    expect(statusOf('\x16\x03\x01\x00\xa5\x01\x00')).toBe(400);
    expect(statusOf('GEX')).toBe(400);
    expect(statusOf('GE')).toBe('partial');
    expect(statusOf('GET /a HT')).toBe('partial');
    expect(statusOf('GET /a HTTP/1.1\r\nHost: a\r\n')).toBe('partial');
  });

  it('refuses an oversized head without waiting for its end', () => {
    expect(statusOf(`GET / HTTP/1.1\r\nHost: a\r\nX-A: ${'a'.repeat(9000)}`)).toBe(431);
    expect(statusOf(`GET /${'a'.repeat(9000)}`)).toBe(414);
    const lines = `GET / HTTP/1.1\r\n${`X-A: ${'a'.repeat(1000)}\r\n`.repeat(Math.ceil(maxRequestHeadBytes / 1000))}`;
    expect(statusOf(lines)).toBe(431);
  });

  it('reads the same requests and bodies from pipelined bytes split at every byte boundary', () => {
    const whole = readAll([pipelined]);
    expect(whole).toEqual([
      'GET /a ["Host","shop","X-A","padded \\t"] ',
      'POST /b ["Host","shop","Content-Length","5"] hello',
      'POST /c ["Host","shop","Transfer-Encoding","chunked"] abcde',
      'GET /d [] ',
    ]);
    for (let point = 1; point < pipelined.length; point++)
      expect(readAll(splitAt(pipelined, [point]))).toEqual(whole);
    expect(readAll([...pipelined].map((byte) => Buffer.of(byte)))).toEqual(whole);
  });

  it('reads the same from any split of the bytes over reads (property)', () => {
    const whole = readAll([pipelined]);
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: pipelined.length - 1 }), { maxLength: 40 }),
        (points) => {
          expect(readAll(splitAt(pipelined, points))).toEqual(whole);
        },
      ),
    );
  });

  it('gives the same verdict on a malformed stream whatever its split (property)', () => {
    const streams = [
      'GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\nHost: a\r\n\r\n',
      'POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n',
      'POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello0\r\n\r\n',
      'POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;\r\nhello\r\n0\r\n\r\n',
      'POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer\r\n\r\n',
      'GET /a HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\tfolded\r\n\r\n',
    ].map((text) => Buffer.from(text, 'latin1'));
    fc.assert(
      fc.property(
        fc.constantFrom(...streams),
        fc.array(fc.integer({ min: 1, max: 200 }), { maxLength: 20 }),
        (stream, points) => {
          const whole = readAll([stream]);
          expect(whole.at(-1)).toMatch(/refused/);
          expect(
            readAll(
              splitAt(
                stream,
                points.filter((p) => p < stream.length),
              ),
            ),
          ).toEqual(whole);
        },
      ),
    );
  });
});

describe('router: its chunked body reader', () => {
  const decode = (text: string) => {
    const decoder = new ChunkedDecoder();
    const bytes = Buffer.from(text, 'latin1');
    const parts: Buffer[] = [];
    const read = decoder.read(bytes, 0, bytes.length, (from, to) => parts.push(bytes.subarray(from, to)));
    return read.error ?? (read.done ? Buffer.concat(parts).toString('latin1') : 'partial');
  };

  it('reads chunks, extensions, leading zeros and trailers', () => {
    expect(decode('5\r\nhello\r\n0\r\n\r\n')).toBe('hello');
    expect(decode('a;x=1;y="q\\"r"\r\n0123456789\r\n0\r\n\r\n')).toBe('0123456789');
    expect(decode('000005\r\nhello\r\n0\r\nX-T: 1\r\nY: \r\n\r\n')).toBe('hello');
    expect(decode('5\r\nhel')).toBe('partial');
  });

  it.each([
    ['whitespace after the size', '5 \r\nhello\r\n0\r\n\r\n'],
    ['an empty extension', '5;\r\nhello\r\n0\r\n\r\n'],
    ['a bare LF after the size', '5\nhello\r\n0\r\n\r\n'],
    ['no CRLF after the data', '5\r\nhelloX\r\n0\r\n\r\n'],
    ['a size that is not hex', 'g\r\n'],
    ['a size too large', 'fffffffffffff\r\n'],
    ['a trailer without a colon', '0\r\nBad\r\n\r\n'],
    ['a trailer with a control character', '0\r\nX: a\x01\r\n\r\n'],
    ['a bare LF ending the trailers', '0\r\n\n'],
  ])('refuses %s', (_name, text) => {
    // A fault named, not a body nor a wait for more.
    expect(['hello', 'partial', '']).not.toContain(decode(text));
  });
});
