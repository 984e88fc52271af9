/** Types of bench/certificates.js, for the TypeScript tests that use it. */
export interface TestCertificate {
  /** The certificate's file (PEM). */
  cert: string;
  /** Its private key's file (PEM). */
  key: string;
  /** SHA-256 fingerprint, as a peer certificate's `fingerprint256`. */
  fingerprint: string;
}

/** Self-signed for `names` (the first its CN), valid for `days` (default 2). */
export function makeCertificate(
  dir: string,
  file: string,
  names: readonly string[],
  days?: number,
): TestCertificate;
export function fingerprintOf(certFile: string): string;
