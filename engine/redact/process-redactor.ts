/**
 * The Redactor of this process: every secret value it can read (its `CUTOVER_SECRET_*` variables
 * and the lines of its secrets file) and the credential shapes (core/redact.ts). Built once by the
 * process that writes (a runner, a server) and applied at its writers, so no call site has to
 * remember to mask.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { type Redactor, redactorOf } from '../../core/redact.js';
import { parseDotenv, secretEnvPrefix, secretsFileEnv } from '../secrets/secret-source.js';

/**
 * The values of every secret `env` gives this process. The secrets file is read here only to know
 * what to mask: a file the secret source would refuse (open to others, in the work tree) is still
 * masked, and one that cannot be read masks nothing (the source says why when a secret is needed).
 */
export function knownSecretValues(env: NodeJS.ProcessEnv = process.env): string[] {
  const values: string[] = [];
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith(secretEnvPrefix) && value !== undefined) values.push(value);
  }
  const file = env[secretsFileEnv];
  if (file) {
    try {
      values.push(...parseDotenv(readFileSync(path.resolve(file), 'utf8'), file).values());
    } catch {
      // unreadable or malformed: nothing from it is known here
    }
  }
  return values;
}

/** The redactor of the secrets `env` gives this process, and of the credential shapes. */
export function processRedactor(env: NodeJS.ProcessEnv = process.env): Redactor {
  return redactorOf(knownSecretValues(env));
}
