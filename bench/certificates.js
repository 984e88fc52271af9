/**
 * Certificates made at run time with `openssl`, for the benches and the tests (test/support/
 * certificates.ts): self-signed, P-256 keys (fast handshakes), in a directory the caller owns and
 * cleans up.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A self-signed certificate for `names` (the first is its subject's CN, all are DNS SANs), written
 * as `<file>.pem` and `<file>.key` in `dir`, valid for `days` days (two by default).
 */
export function makeCertificate(dir, file, names, days = 2) {
  const cert = path.join(dir, `${file}.pem`);
  const key = path.join(dir, `${file}.key`);
  const san = names.map((name) => `DNS:${name}`).join(',');
  const args = [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-subj',
    `/CN=${names[0]}`,
    '-addext',
    `subjectAltName=${san}`,
    '-days',
    String(days),
  ];
  try {
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (error) {
    if (error.code === 'ENOENT')
      throw new Error('making a test certificate needs openssl on PATH (apt-get install openssl)');
    throw error;
  }
  return { cert, key, fingerprint: fingerprintOf(cert) };
}

/** A certificate file's SHA-256 fingerprint, as a peer certificate's `fingerprint256`. */
export function fingerprintOf(certFile) {
  return new X509Certificate(readFileSync(certFile)).fingerprint256;
}
