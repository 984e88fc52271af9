import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';

/**
 * A certificate and its private key as PEM files: read, parsed and matched in one place, for the
 * engine's check of a topology (before a migration) and the router's load (at every change), so a
 * pair one accepts is a pair the other serves.
 */

/** What is wrong with one file of a pair: which file, and one line on why. */
export class PemPairProblem extends Error {
  constructor(
    readonly part: 'cert' | 'key',
    message: string,
  ) {
    super(message);
  }
}

export interface PemPair {
  cert: string;
  key: string;
  x509: X509Certificate;
}

/** Reads and checks a pair: the certificate parses, the key parses and is the certificate's. */
export async function readPemPair(certFile: string, keyFile: string): Promise<PemPair> {
  const cert = await readPem(certFile, 'cert');
  const key = await readPem(keyFile, 'key');
  return { cert, key, x509: checkPemPair(cert, key, certFile, keyFile) };
}

/** The pair's certificate, or a PemPairProblem naming the file at fault. */
export function checkPemPair(cert: string, key: string, certFile: string, keyFile: string): X509Certificate {
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch (error) {
    throw new PemPairProblem('cert', `${certFile} holds no PEM certificate (${(error as Error).message})`);
  }
  let matches: boolean;
  try {
    matches = x509.checkPrivateKey(createPrivateKey(key));
  } catch (error) {
    throw new PemPairProblem(
      'key',
      `${keyFile} holds no usable PEM private key (${(error as Error).message})`,
    );
  }
  if (!matches)
    throw new PemPairProblem('key', `the key ${keyFile} does not match the certificate ${certFile}`);
  return x509;
}

async function readPem(file: string, part: 'cert' | 'key'): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const cause =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES'
          ? 'permission denied'
          : (code ?? (error as Error).message);
    const what = part === 'cert' ? 'certificate' : 'key';
    throw new PemPairProblem(part, `cannot read the ${what} ${file}: ${cause}`);
  }
}
