/**
 * Bearer-token auth with two roles: `viewer` (plan, validate and every read) and `operator`
 * (everything). Tokens come from a tokens file or `CUTOVER_TOKENS`; only their SHA-256 digests are
 * kept in memory, presented tokens are compared by digest in constant time against every entry, and
 * no token is ever logged.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CutoverError, environmentFault } from '../core/errors.js';
import { formatDiagnostic } from '../core/topology/diagnostic.js';
import { parseLocatedYaml } from '../core/topology/parse-located-yaml.js';

export type Role = 'viewer' | 'operator';
export const roles: readonly Role[] = ['viewer', 'operator'];

/** Who made a request: a token's name and role, or nobody (auth is off). */
export interface Principal {
  name: string;
  role: Role;
}

interface TokenEntry {
  name: string;
  role: Role;
  digest: Buffer;
}

export interface TokenStore {
  readonly size: number;
  /** The principal of a presented token, or null. Time does not depend on which entry matched. */
  verify(token: string): Principal | null;
}

function digestOf(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

export function createTokenStore(entries: readonly TokenEntry[]): TokenStore {
  return {
    size: entries.length,
    verify(token) {
      const presented = digestOf(token);
      let found: TokenEntry | null = null;
      for (const entry of entries) {
        // Every entry is compared; no early exit.
        if (timingSafeEqual(entry.digest, presented) && found === null) found = entry;
      }
      return found ? { name: found.name, role: found.role } : null;
    },
  };
}

const minTokenLength = 16;

function checkRole(role: unknown, where: string): Role {
  if (role === 'viewer' || role === 'operator') return role;
  throw new CutoverError('USAGE', `${where}: role must be viewer or operator, not ${JSON.stringify(role)}`);
}

function plainTokenEntry(name: string, role: Role, token: string, where: string): TokenEntry {
  if (token.length < minTokenLength) {
    throw new CutoverError(
      'USAGE',
      `${where}: token of ${name} is shorter than ${minTokenLength} characters`,
    );
  }
  return { name, role, digest: digestOf(token) };
}

/**
 * `CUTOVER_TOKENS`: comma-separated `name:role:token` entries, e.g.
 * `ci:operator:6f1c…,dashboard:viewer:93ab…`.
 */
export function parseTokensEnv(value: string): TokenEntry[] {
  const entries: TokenEntry[] = [];
  for (const [index, raw] of value.split(',').entries()) {
    const item = raw.trim();
    if (item === '') continue;
    const where = `CUTOVER_TOKENS entry ${index + 1}`;
    const first = item.indexOf(':');
    const second = first < 0 ? -1 : item.indexOf(':', first + 1);
    if (first <= 0 || second < 0) {
      throw new CutoverError('USAGE', `${where}: expected name:role:token`);
    }
    const name = item.slice(0, first);
    const role = checkRole(item.slice(first + 1, second), where);
    entries.push(plainTokenEntry(name, role, item.slice(second + 1), where));
  }
  return entries;
}

/**
 * A tokens file (YAML or JSON):
 *
 *     tokens:
 *       - { name: ci, role: operator, sha256: 5e884898… }   # the token's SHA-256, hex
 *       - { name: dashboard, role: viewer, token: 93ab… }   # or the token itself
 */
export function readTokensFile(file: string): TokenEntry[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const fault = environmentFault(error, `reading the tokens file ${file}`);
    if (fault) throw fault;
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new CutoverError('USAGE', `${file}: no such tokens file; check the path given to --tokens-file`);
    }
    throw new CutoverError('USAGE', `${file}: cannot read the tokens file: ${(error as Error).message}`);
  }
  // Outside input: the bounded parser, like every YAML the project reads (an alias bomb is refused
  // before anything walks it), with the problem located.
  const parsed = parseLocatedYaml(text, file);
  if (!parsed.ok) {
    throw new CutoverError('USAGE', `${formatDiagnostic(parsed.diagnostic)}; fix the tokens file`);
  }
  const doc = parsed.value;
  const list = (doc as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(list)) throw new CutoverError('USAGE', `${file}: expected a list under \`tokens:\``);
  const names = new Set<string>();
  return list.map((item: unknown, index) => {
    const where = `${file}: tokens[${index}]`;
    const entry = (item ?? {}) as Record<string, unknown>;
    const unknownKeys = Object.keys(entry).filter((k) => !['name', 'role', 'token', 'sha256'].includes(k));
    if (unknownKeys.length > 0) throw new CutoverError('USAGE', `${where}: unknown key ${unknownKeys[0]}`);
    const name = entry.name;
    if (typeof name !== 'string' || name === '')
      throw new CutoverError('USAGE', `${where}: name is required`);
    if (names.has(name)) throw new CutoverError('USAGE', `${where}: the name ${name} is used twice`);
    names.add(name);
    const role = checkRole(entry.role, where);
    if (typeof entry.sha256 === 'string' && entry.token === undefined) {
      if (!/^[0-9a-f]{64}$/i.test(entry.sha256)) {
        throw new CutoverError('USAGE', `${where}: sha256 must be 64 hex digits`);
      }
      return { name, role, digest: Buffer.from(entry.sha256, 'hex') };
    }
    if (typeof entry.token === 'string' && entry.sha256 === undefined) {
      return plainTokenEntry(name, role, entry.token, where);
    }
    throw new CutoverError('USAGE', `${where}: give exactly one of token and sha256`);
  });
}

/** The token of an `Authorization: Bearer …` header; undefined when absent or of another scheme. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header);
  return match?.[1];
}

/**
 * A client as rate limits and log-stream limits count it: a valid token (by name), else its
 * address. A token that is not valid counts as its address, never as itself (each guess would get
 * a budget of its own). With auth off (principal null here), every client is its address.
 */
export function clientOf(principal: Principal | null, ip: string): { key: string; label: string } {
  return principal === null
    ? { key: `ip:${ip}`, label: `address ${ip}` }
    : { key: `token:${principal.name}`, label: `token ${principal.name}` };
}
