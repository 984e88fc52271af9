import { parseHostPort } from '../core/host-port.js';

/**
 * A route's TLS settings as the router serves them, read from its routing-table entry
 * (RoutingEntry.tls). Pure: no I/O (certificates.ts reads the files).
 */
export interface RouteTlsState {
  /** Absolute paths of PEM files, in the entry's order: the first answers clients without a match. */
  certificates: readonly { cert: string; key: string }[];
  /** How the main listener speaks: a listener is opened anew when this changes. */
  protocol: TlsProtocol;
  redirectHttp?: string;
  /** Strict-Transport-Security's value on answers over TLS; absent: not sent. */
  hstsHeader?: string;
}

export type TlsVersion = 'TLSv1.2' | 'TLSv1.3';

export interface TlsProtocol {
  type: 'tls';
  minVersion: TlsVersion;
  /** ALPN offers h2 beside http/1.1. */
  http2: boolean;
}

/** How a listener speaks. `h2c`: HTTP/2 with prior knowledge beside HTTP/1.1, on a plain listener. */
export type ListenerProtocol = { type: 'http'; h2c: boolean } | TlsProtocol;

export const plainHttp: ListenerProtocol = { type: 'http', h2c: false };

export function sameProtocol(a: ListenerProtocol, b: ListenerProtocol): boolean {
  if (a.type === 'http') return b.type === 'http' && a.h2c === b.h2c;
  return b.type === 'tls' && a.minVersion === b.minVersion && a.http2 === b.http2;
}

/** The route's TLS state, or what is wrong with the entry's `tls` (the route is then not served). */
export function routeTlsState(raw: unknown): RouteTlsState | string {
  if (!isObject(raw)) return 'is not an object';
  const { certificates, minVersion, http2, redirectHttp, hsts } = raw;
  if (!Array.isArray(certificates) || certificates.length === 0)
    return 'certificates is not a list of {cert, key}';
  const pairs: { cert: string; key: string }[] = [];
  for (const pair of certificates) {
    if (!isObject(pair) || !absolutePath(pair.cert) || !absolutePath(pair.key))
      return `certificate ${JSON.stringify(pair)} is not {cert, key} of absolute paths`;
    pairs.push({ cert: pair.cert, key: pair.key });
  }
  const version = minVersion ?? 'TLSv1.2';
  if (version !== 'TLSv1.2' && version !== 'TLSv1.3')
    return `minVersion ${JSON.stringify(minVersion)} is not TLSv1.2 or TLSv1.3`;
  const state: RouteTlsState = {
    certificates: pairs,
    protocol: { type: 'tls', minVersion: version, http2: http2 !== false },
  };
  if (redirectHttp !== undefined) {
    if (typeof redirectHttp !== 'string' || parseHostPort(redirectHttp) === null)
      return `redirectHttp ${JSON.stringify(redirectHttp)} is not host:port`;
    state.redirectHttp = redirectHttp.toLowerCase();
  }
  if (hsts !== undefined) {
    const header = hstsHeader(hsts);
    if (header === null)
      return `hsts ${JSON.stringify(hsts)} is not {maxAgeSeconds, includeSubDomains, preload}`;
    state.hstsHeader = header;
  }
  return state;
}

function hstsHeader(value: unknown): string | null {
  if (!isObject(value)) return null;
  const { maxAgeSeconds, includeSubDomains, preload } = value;
  if (typeof maxAgeSeconds !== 'number' || !Number.isInteger(maxAgeSeconds) || maxAgeSeconds < 0) return null;
  let header = `max-age=${maxAgeSeconds}`;
  if (includeSubDomains === true) header += '; includeSubDomains';
  if (preload === true) header += '; preload';
  return header;
}

function absolutePath(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith('/');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
