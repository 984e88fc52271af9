import { describe, expect, it } from 'vitest';
import {
  checkRequest,
  maxHeaderFields,
  maxHeaderLineBytes,
  maxRequestLineBytes,
  type RequestLine,
} from '../../router/request-checks.js';

function request(overrides: Partial<RequestLine> = {}): RequestLine {
  return {
    method: 'GET',
    url: '/orders?x=1',
    httpVersionMajor: 1,
    httpVersionMinor: 1,
    rawHeaders: ['Host', 'shop.example'],
    ...overrides,
  };
}

const statusOf = (overrides: Partial<RequestLine>) => {
  const verdict = checkRequest(request(overrides));
  return verdict.ok ? verdict.target : verdict.status;
};

describe('router: what it refuses before anything goes upstream', () => {
  it('passes an ordinary request with its target unchanged', () => {
    expect(checkRequest(request())).toEqual({ ok: true, target: '/orders?x=1' });
  });

  it('sends an absolute-form target on as origin-form, and refuses one with user information', () => {
    expect(statusOf({ url: 'http://shop.example/orders?x=1' })).toBe('/orders?x=1');
    expect(statusOf({ url: 'http://shop.example?x=1' })).toBe('/?x=1');
    expect(statusOf({ url: 'http://shop.example' })).toBe('/');
    expect(statusOf({ url: 'http://user@shop.example/orders' })).toBe(400);
    expect(statusOf({ url: '*' })).toBe(400);
    expect(statusOf({ url: '/a/%00/b' })).toBe(400);
    expect(statusOf({ url: '/a?b=%00' })).toBe('/a?b=%00');
  });

  it('reads only plain chunked as a Transfer-Encoding, and none in HTTP/1.0', () => {
    const coded = (value: string, minor = 1) =>
      statusOf({ httpVersionMinor: minor, rawHeaders: ['Host', 'shop', 'Transfer-Encoding', value] });
    expect(coded('chunked')).toBe('/orders?x=1');
    expect(coded('Chunked')).toBe('/orders?x=1');
    for (const value of ['gzip, chunked', 'identity', '', 'chunked, chunked']) expect(coded(value)).toBe(501);
    expect(coded('chunked', 0)).toBe(400);
    // Two header lines are one list: "gzip, chunked".
    expect(
      statusOf({ rawHeaders: ['Host', 'shop', 'Transfer-Encoding', 'gzip', 'Transfer-Encoding', 'chunked'] }),
    ).toBe(501);
  });

  it('refuses Host twice or malformed, as nginx does', () => {
    expect(statusOf({ rawHeaders: ['Host', 'shop', 'host', 'shop'] })).toBe(400);
    for (const host of ['', 'sh op', 'shop/x', 'a..b', 'shop\x7f'])
      expect(statusOf({ rawHeaders: ['Host', host] })).toBe(400);
    for (const host of ['shop:8080', '[::1]:80', 'shop.'])
      expect(statusOf({ rawHeaders: ['Host', host] })).toBe('/orders?x=1');
  });

  it("passes a request line or a header line of exactly nginx's buffer (8 KiB with its CRLF), refuses one byte more", () => {
    // GET <target> HTTP/1.1 CRLF: 12 bytes besides the method and the target.
    const target = (lineBytes: number) => `/${'t'.repeat(lineBytes - 'GET'.length - 12 - 1)}`;
    expect(statusOf({ url: target(8192) })).toBe(target(8192));
    expect(statusOf({ url: target(8193) })).toBe(414);
    // X-A:<value> CRLF, counted without whitespace around the value (Node trims it).
    const header = (lineBytes: number) => ['Host', 'shop', 'X-A', 'v'.repeat(lineBytes - 'X-A'.length - 3)];
    expect(statusOf({ rawHeaders: header(8192) })).toBe('/orders?x=1');
    expect(statusOf({ rawHeaders: header(8193) })).toBe(431);
  });

  it('refuses other versions (505), TRACE (405) and lines or heads past the limits', () => {
    expect(statusOf({ httpVersionMajor: 2, httpVersionMinor: 0 })).toBe(505);
    expect(statusOf({ method: 'TRACE' })).toBe(405);
    expect(statusOf({ url: `/${'t'.repeat(maxRequestLineBytes)}` })).toBe(414);
    expect(statusOf({ rawHeaders: ['Host', 'shop', 'X-A', 'v'.repeat(maxHeaderLineBytes)] })).toBe(431);
    const many = Array.from({ length: maxHeaderFields }, (_, i) => [`X-${i}`, 'v']).flat();
    expect(statusOf({ rawHeaders: ['Host', 'shop', ...many] })).toBe(431);
    expect(statusOf({ rawHeaders: many.slice(0, -2).concat('Host', 'shop') })).toBe('/orders?x=1');
  });
});
