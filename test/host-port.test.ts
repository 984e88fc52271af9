import { describe, expect, it } from 'vitest';
import { parseHostPort, splitHostPort } from '../core/host-port.js';

/** The one host:port grammar that the loader, the router, the drivers and the probes share. */
describe('host:port', () => {
  it('splits IPv4, names and bracketed IPv6, giving node:net the host without brackets', () => {
    expect(parseHostPort('127.0.0.1:8080')).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(parseHostPort('localhost:1')).toEqual({ host: 'localhost', port: 1 });
    expect(parseHostPort('[::1]:65535')).toEqual({ host: '::1', port: 65_535 });
  });

  it('takes an address as drivers print it: an http:// prefix and a trailing slash', () => {
    expect(parseHostPort('http://127.0.0.1:8080/')).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(parseHostPort('HTTP://[::1]:80')).toEqual({ host: '::1', port: 80 });
  });

  it('refuses what is not host:port, and ports out of 1-65535', () => {
    for (const bad of [
      '',
      '127.0.0.1',
      ':80',
      '::1:80',
      '[::1:80',
      '[]:80',
      'a]b:80',
      'host:',
      'host:8o',
      'host:123456',
      'host:0',
      'host:65536',
      'https://host:80',
    ]) {
      expect(parseHostPort(bad), bad).toBeNull();
    }
  });

  it('splitHostPort checks the syntax only, so the loader can name an out-of-range port', () => {
    expect(splitHostPort('127.0.0.1:99999')).toEqual({ host: '127.0.0.1', port: 99_999 });
    expect(splitHostPort('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(splitHostPort('http://127.0.0.1:80')).toBeNull();
  });
});
