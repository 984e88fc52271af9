import { createHash, createHmac, randomBytes } from 'node:crypto';
import { link, readFile, unlink, writeFile } from 'node:fs/promises';
import { CutoverError, environmentFault } from '../../core/errors.js';
import { makeDir } from '../runner/make-dir.js';
import type { StateDir } from '../store/state-dir.js';

/** 256 bits: the key of HMAC-SHA256. */
const secretKeyBytes = 32;
/** Hex digits of the key's own hash that name it in a digest (not secret: a fingerprint). */
const keyIdChars = 12;

/** Hashes a secret's value with the state directory's key: `hmac-sha256:<key id>:<hex>`. */
export type SecretHasher = (value: string) => string;

/**
 * The state directory's secret hasher. The key file is made on first use, mode 0600, and published
 * with link(2), which fails if another process published one first: every process of a state
 * directory hashes with the same key, so digests recorded by a runner compare with a planner's.
 * Digests carry the key's id, so digests made with another key (another state directory) are told
 * apart instead of reading as a change.
 */
export async function secretHasher(stateDir: StateDir): Promise<SecretHasher> {
  const key = await readOrCreateKey(stateDir);
  const keyId = createHash('sha256').update(key).digest('hex').slice(0, keyIdChars);
  return (value) => `hmac-sha256:${keyId}:${createHmac('sha256', key).update(value, 'utf8').digest('hex')}`;
}

async function readOrCreateKey(stateDir: StateDir): Promise<Buffer> {
  const file = stateDir.secretKeyFile();
  try {
    const existing = await readKey(file);
    if (existing) return existing;
    makeDir(stateDir.root);
    const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
    await writeFile(temp, randomBytes(secretKeyBytes).toString('hex'), { mode: 0o600, flag: 'wx' });
    try {
      await link(temp, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      await unlink(temp).catch(() => undefined);
    }
    return (await readKey(file)) as Buffer;
  } catch (error) {
    throw environmentFault(error, `secret key ${file}`) ?? error;
  }
}

async function readKey(file: string): Promise<Buffer | undefined> {
  try {
    const text = (await readFile(file, 'utf8')).trim();
    if (!/^[0-9a-f]+$/.test(text) || text.length !== secretKeyBytes * 2) {
      throw new CutoverError(
        'STATE_CORRUPT',
        `secret key ${file} is not ${secretKeyBytes * 2} hex digits; remove it (a new key is made, and a secret changed meanwhile shows only after its next provision)`,
      );
    }
    return Buffer.from(text, 'hex');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
