import type { X509Certificate } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { createSecureContext, type SecureContext } from 'node:tls';
import { checkPemPair, readPemPair } from '../platform/pem-pair.js';
import type { TlsVersion } from './route-tls.js';

/** One certificate to serve: its chain and private key, as PEM. */
export interface CertificatePem {
  cert: string;
  key: string;
  /** Where it came from, for messages (`/etc/tls/shop.pem`). */
  origin: string;
  /** Where its key came from, when a file. */
  keyOrigin?: string;
}

/**
 * Where a route's certificates come from. The router knows only this interface: files are the one
 * source built in (FileCertificates); an ACME client (which needs outside network, out of reach
 * here) would be another source, renewing into files or answering `load` itself.
 *
 * Invariant: `load` answers a complete, matching set or throws; the store keeps serving the last
 * good set while a source fails (a rotation half written), so a handshake never meets a key that
 * does not match its certificate.
 */
export interface CertificateSource {
  /** Reads the certificates to serve now; the first is the default. Throws naming the file and fault. */
  load(): Promise<CertificatePem[]>;
  /** Changes whenever `load` may answer something new; the store polls it. */
  version(): Promise<string>;
}

/** PEM files on disk, pairs of certificate (with its chain) and key, read again when they change. */
export class FileCertificates implements CertificateSource {
  constructor(private readonly pairs: readonly { cert: string; key: string }[]) {}

  async load(): Promise<CertificatePem[]> {
    return Promise.all(
      this.pairs.map(async ({ cert, key }) => {
        const pair = await readPemPair(cert, key);
        return { cert: pair.cert, key: pair.key, origin: cert, keyOrigin: key };
      }),
    );
  }

  /** Inode, size and modification time of every file: a rename or a rewrite in place changes it. */
  async version(): Promise<string> {
    const files = this.pairs.flatMap(({ cert, key }) => [cert, key]);
    const stats = await Promise.all(
      files.map((file) =>
        stat(file).then(
          (s) => `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`,
          (error: NodeJS.ErrnoException) => `missing:${error.code}`,
        ),
      ),
    );
    return stats.join('|');
  }
}

/** A certificate ready for handshakes: the names it answers for, and its context. */
export interface ServedCertificate {
  readonly x509: X509Certificate;
  readonly context: SecureContext;
  /** The options `context` was made of, for a server's default context (setSecureContext). */
  readonly options: { cert: string; key: string; minVersion: TlsVersion };
}

/**
 * Checks one PEM pair and makes its context: the certificate parses, the key parses and is the
 * certificate's. Throws one line naming the files and the fault.
 */
export function serveCertificate(pem: CertificatePem, minVersion: TlsVersion): ServedCertificate {
  const x509 = checkPemPair(pem.cert, pem.key, pem.origin, pem.keyOrigin ?? `the key of ${pem.origin}`);
  const options = { cert: pem.cert, key: pem.key, minVersion };
  return { x509, context: createSecureContext(options), options };
}

/** How many SNI names a set remembers the answer for (a client may send any name). */
const maxRememberedNames = 1000;

/** The certificates of one route, as served now: the first whose names match an SNI name, else the first. */
export class CertificateSet {
  private readonly chosen = new Map<string, ServedCertificate>();

  constructor(readonly certificates: readonly ServedCertificate[]) {}

  get fallback(): ServedCertificate {
    return this.certificates[0] as ServedCertificate;
  }

  /** The certificate for SNI name `servername` (the default when none names it). */
  pick(servername: string): ServedCertificate {
    const name = servername.toLowerCase();
    const known = this.chosen.get(name);
    if (known) return known;
    const found = this.certificates.find((c) => c.x509.checkHost(name) !== undefined) ?? this.fallback;
    if (this.chosen.size >= maxRememberedNames) this.chosen.clear();
    this.chosen.set(name, found);
    return found;
  }
}
