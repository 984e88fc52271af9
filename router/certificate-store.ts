import type { RouteCertificatesInfo, ServedCertificateInfo } from '../core/certificate-expiry.js';
import {
  CertificateSet,
  type CertificateSource,
  FileCertificates,
  type ServedCertificate,
  serveCertificate,
} from './certificates.js';
import type { RouteTlsState, TlsVersion } from './route-tls.js';

/**
 * How often the certificate files of the TLS routes are looked at. A certificate replaced on disk
 * is served to new handshakes within this and a read (the bar is 2 s); a look is one stat per file.
 */
export const certificatePollIntervalMs = 500;

interface RouteCertificates {
  /** The entry's certificate paths and version: another one means another source. */
  settings: string;
  source: CertificateSource;
  minVersion: TlsVersion;
  /** The source's version the served set was loaded at (or failed at). */
  version: string;
  /** Served now: the last set that loaded whole; null while none did. */
  set: CertificateSet | null;
  /** What the served set is, for `GET /routes` and `/metrics`: one per certificate, in order. */
  served: ServedCertificateInfo[];
  /** When the served set was loaded (epoch ms). */
  loadedAtMs: number | null;
  /** Why the last load failed, while it does. */
  problem: string | null;
  /** When it failed (epoch ms). */
  failedAtMs: number | null;
  /** Loads that failed since the route was first served over TLS (kept when its files change). */
  failedLoads: number;
}

/** A route's certificates as `/metrics` shows them (certificate-metrics.ts). */
export interface RouteCertificateMetrics {
  route: string;
  certificates: readonly ServedCertificateInfo[];
  failing: boolean;
  failedLoads: number;
}

/**
 * The certificates of every TLS route the router serves, kept current with their source: new
 * handshakes get a replaced certificate, open connections keep theirs. A load that fails (a file
 * missing, a key that does not match: a rotation caught half way) keeps the last good set and is
 * retried at the next look; a route that never loaded has no certificate and its listener is not
 * opened.
 */
export class CertificateStore {
  private readonly routes = new Map<string, RouteCertificates>();
  private readonly timer: NodeJS.Timeout;
  private polling = false;
  /** Told when any route's certificates change: TLS listeners renew their default context. */
  private readonly watchers = new Set<() => void>();

  constructor(
    private readonly log: (line: string) => void,
    pollIntervalMs = certificatePollIntervalMs,
  ) {
    this.timer = setInterval(() => void this.poll(), pollIntervalMs);
    this.timer.unref();
  }

  /**
   * Follows a new table: loads the certificates of routes new to TLS or with other files, forgets
   * routes without TLS. Answers the routes that have no usable certificate, with the reason.
   */
  async update(routes: ReadonlyMap<string, { tls?: RouteTlsState }>): Promise<Map<string, string>> {
    for (const key of this.routes.keys()) if (!routes.get(key)?.tls) this.routes.delete(key);
    await Promise.all(
      [...routes].map(async ([key, route]) => {
        if (!route.tls) return;
        const { certificates, protocol } = route.tls;
        const settings = JSON.stringify([certificates, protocol.minVersion]);
        const before = this.routes.get(key);
        if (before?.settings === settings) return;
        const entry: RouteCertificates = {
          settings,
          source: new FileCertificates(certificates),
          minVersion: protocol.minVersion,
          version: '',
          set: null,
          served: [],
          loadedAtMs: null,
          problem: null,
          failedAtMs: null,
          failedLoads: before?.failedLoads ?? 0,
        };
        this.routes.set(key, entry);
        await this.load(key, entry);
      }),
    );
    const unusable = new Map<string, string>();
    for (const [key, entry] of this.routes)
      if (!entry.set) unusable.set(key, entry.problem ?? 'no certificate loaded');
    return unusable;
  }

  /** The certificates served now for a route, or null when it has none. */
  current(routeKey: string): CertificateSet | null {
    return this.routes.get(routeKey)?.set ?? null;
  }

  /** Why the route has no certificate, or why its last load failed. */
  problem(routeKey: string): string | null {
    return this.routes.get(routeKey)?.problem ?? null;
  }

  /** What a TLS route serves and how its last load went, for `GET /routes`; undefined for a plain route. */
  snapshot(routeKey: string): RouteCertificatesInfo | undefined {
    const entry = this.routes.get(routeKey);
    if (!entry) return undefined;
    return {
      certificates: entry.served.map((c) => ({ ...c, names: [...c.names] })),
      ...(entry.loadedAtMs === null ? {} : { loadedAt: new Date(entry.loadedAtMs).toISOString() }),
      ...(entry.problem === null ? {} : { problem: entry.problem }),
      ...(entry.failedAtMs === null || entry.problem === null
        ? {}
        : { failedAt: new Date(entry.failedAtMs).toISOString() }),
      failedLoads: entry.failedLoads,
    };
  }

  /** Every TLS route's certificates and failed loads, for `/metrics`. */
  metrics(): RouteCertificateMetrics[] {
    return [...this.routes].map(([route, entry]) => ({
      route,
      certificates: entry.served,
      failing: entry.problem !== null,
      failedLoads: entry.failedLoads,
    }));
  }

  /** Calls `changed` whenever some route's certificates change; answers how to stop. */
  onChange(changed: () => void): () => void {
    this.watchers.add(changed);
    return () => this.watchers.delete(changed);
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** Looks at every route's source; reloads those whose version moved. One look at a time. */
  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      await Promise.all(
        [...this.routes].map(async ([key, entry]) => {
          if ((await entry.source.version()) !== entry.version) await this.load(key, entry);
        }),
      );
    } finally {
      this.polling = false;
    }
  }

  private async load(key: string, entry: RouteCertificates): Promise<void> {
    const version = await entry.source.version();
    try {
      const pems = await entry.source.load();
      const set = new CertificateSet(pems.map((pem) => serveCertificate(pem, entry.minVersion)));
      // A table applied meanwhile may have replaced this entry: its own load decides.
      if (this.routes.get(key) !== entry) return;
      const renewed = entry.set !== null;
      entry.set = set;
      entry.served = set.certificates.map((c, i) => describeServed(c, pems[i]?.origin ?? ''));
      entry.loadedAtMs = Date.now();
      entry.version = version;
      entry.problem = null;
      entry.failedAtMs = null;
      if (renewed) this.log(`router: ${key} certificates reloaded (${describe(set)})`);
      for (const changed of this.watchers) changed();
    } catch (error) {
      const problem = (error as Error).message;
      if (this.routes.get(key) !== entry) return;
      entry.version = version;
      entry.failedLoads++;
      entry.failedAtMs = Date.now();
      if (problem !== entry.problem) {
        const kept = entry.set ? '; the certificates loaded before are served meanwhile' : '';
        this.log(`router: ${key} certificates not loaded: ${problem}${kept}`);
      }
      entry.problem = problem;
    }
  }
}

function describe(set: CertificateSet): string {
  return set.certificates
    .map((c) => `${c.x509.subject.replace(/\n/g, ', ')} until ${c.x509.validTo}`)
    .join('; ');
}

/** What `GET /routes` tells of a served certificate. */
function describeServed(served: ServedCertificate, file: string): ServedCertificateInfo {
  const { x509 } = served;
  return {
    names: certificateNames(x509.subjectAltName, x509.subject),
    file,
    notBefore: new Date(x509.validFrom).toISOString(),
    notAfter: new Date(x509.validTo).toISOString(),
    fingerprint256: x509.fingerprint256,
  };
}

/**
 * The names SNI matches a certificate by (CertificateSet.pick, through checkHost): its DNS subject
 * alternative names (`DNS:a.test, DNS:*.a.test`), else the CN of its subject (`CN=a.test`).
 */
function certificateNames(subjectAltName: string | undefined, subject: string): string[] {
  const dns = (subjectAltName ?? '')
    .split(', ')
    .filter((entry) => entry.startsWith('DNS:'))
    .map((entry) => entry.slice(4).replace(/^"(.*)"$/, '$1'));
  if (dns.length > 0) return dns;
  const cn = subject.split('\n').find((line) => line.startsWith('CN='));
  return cn === undefined ? [] : [cn.slice(3)];
}
