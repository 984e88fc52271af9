/**
 * The certificates a TLS route serves, as the router's `GET /routes` tells them
 * (router/certificate-store.ts), and when one deserves an operator's attention. Pure.
 */

/** One certificate served now. */
export interface ServedCertificateInfo {
  /** The names it answers for, as SNI picks it: its DNS subject alternative names, else its CN. */
  names: string[];
  /** The PEM file it was read from. */
  file: string;
  /** ISO 8601. */
  notBefore: string;
  /** ISO 8601: after this, clients refuse it. */
  notAfter: string;
  /** SHA-256 of the DER certificate, as `AB:CD:…` (a TLS client's `fingerprint256`). */
  fingerprint256: string;
}

/** A TLS route's certificates, and how their last load went. */
export interface RouteCertificatesInfo {
  /** Served now, in the entry's order (the first answers clients without a match); empty while none loaded. */
  certificates: ServedCertificateInfo[];
  /** When the served certificates were loaded (ISO 8601); absent while none were. */
  loadedAt?: string;
  /**
   * Why the files on disk could not be loaded, while they cannot: the certificates above (loaded
   * before) are still served, or none when none ever loaded. Absent once a load succeeds.
   */
  problem?: string;
  /** When the load of `problem` failed (ISO 8601). */
  failedAt?: string;
  /** Loads of the route's files that failed since the router started serving it over TLS. */
  failedLoads: number;
}

/** A certificate that expires within this many days is flagged (as Let's Encrypt's expiry mails warn). */
export const certificateWarningDays = 14;

export type CertificateExpiry = 'expired' | 'expiring' | 'valid';

/** Whether a certificate has expired, expires within `certificateWarningDays` of `nowMs`, or neither. */
export function certificateExpiry(notAfter: string, nowMs: number): CertificateExpiry {
  const left = Date.parse(notAfter) - nowMs;
  if (!(left > 0)) return 'expired';
  return left <= certificateWarningDays * 86_400_000 ? 'expiring' : 'valid';
}
