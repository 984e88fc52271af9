/**
 * The one registry of cutover's errors. Every error the engine raises carries a stable code, and
 * only the code: what a code means to a caller is each front end's own mapping, kept where the
 * front end lives and exhaustive over these codes (a new code does not compile until it is mapped):
 * the CLI's exit codes in cli/exit-codes.ts, the server's HTTP statuses and problem titles in
 * server/problems.ts.
 */
import type { Diagnostic } from './topology/diagnostic.js';

export const errorCodes = [
  'TOPOLOGY_INVALID',
  'TOPOLOGY_NOT_FOUND',
  'TOPOLOGY_TOO_LARGE',
  'ENVIRONMENT_MISMATCH',
  'GIT_REF_UNREADABLE',
  'STATE_CORRUPT',
  'MIGRATION_NOT_FOUND',
  /** No layout was ever recorded for the environment (never migrated). */
  'ENVIRONMENT_NOT_FOUND',
  'MIGRATION_AMBIGUOUS',
  /** No recorded layout answers a rollback's `--to` (never recorded, or no longer kept). */
  'LAYOUT_NOT_FOUND',
  /** A migration is in flight for the environment. */
  'MIGRATION_CONFLICT',
  'PLAN_MISMATCH',
  'PLAN_STALE',
  /** A file given as a saved plan is not one (not JSON, a plan rendering, an unknown format version). */
  'PLAN_INVALID',
  'VERB_REFUSED',
  /** The process driving a migration (or the router) does not answer. */
  'RUNNER_UNREACHABLE',
  'CANCELLED',
  /** A driver refused or failed outside a migration (taking an environment down). */
  'DRIVER_FAILED',
  'TEMPORAL_UNREACHABLE',
  /** The verb cannot work in this mode (local, Temporal, a cutover server). */
  'NOT_SUPPORTED',
  /** A cutover server (`--server`) refused a request for a reason of its own. */
  'SERVER_REFUSED',
  'SERVER_UNREACHABLE',
  'USAGE',
  /** The machine refused: a full or read-only disk, permissions, a port in use, a missing program. */
  'ENVIRONMENT_FAULT',
  /** A bug in cutover. */
  'INTERNAL',
] as const;

export type ErrorCode = (typeof errorCodes)[number];

const known: ReadonlySet<string> = new Set(errorCodes);

/** Whether a code from outside (a server's problem, the router's answer) is one of the engine's. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && known.has(code);
}

export class CutoverError extends Error {
  override readonly name = 'CutoverError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

/** An invariant of cutover itself was violated: a bug, never a user error. */
export class InvariantError extends CutoverError {
  constructor(message: string) {
    super('INTERNAL', `invariant violated: ${message}`);
  }
}

export function assertNever(value: never, what: string): never {
  throw new InvariantError(`unexpected ${what}: ${JSON.stringify(value)}`);
}

/**
 * Raised with every located problem of a topology; front ends print them one per line. (Here, not
 * in api.ts, so that reporting it does not load the topology loader.)
 */
export class TopologyInvalidError extends CutoverError {
  constructor(readonly diagnostics: Diagnostic[]) {
    super(
      'TOPOLOGY_INVALID',
      `${diagnostics.length} problem${diagnostics.length === 1 ? '' : 's'} in the topology`,
    );
  }
}

const fileInTheWay = {
  cause: 'a file is in the way where a directory is expected',
  next: 'move it away, or choose another directory',
};

/** What an operating-system error code means to an operator, and what to do about it. */
const environmentCauses: Record<string, { cause: string; next: string }> = {
  ENOSPC: { cause: 'no space left on the device', next: 'free some space, then try again' },
  EDQUOT: { cause: 'the disk quota is exhausted', next: 'free some space, then try again' },
  EROFS: { cause: 'the file system is read-only', next: 'use a writable directory' },
  EACCES: { cause: 'permission denied', next: 'check the owner and mode, or run as a user that may' },
  EPERM: { cause: 'operation not permitted', next: 'check the owner and mode, or run as a user that may' },
  EADDRINUSE: {
    cause: 'the address is already in use',
    next: 'stop the program listening there, or choose another port',
  },
  EADDRNOTAVAIL: {
    cause: 'the address is not available on this machine',
    next: 'listen on an address this machine has (127.0.0.1, 0.0.0.0, ::1)',
  },
  EMFILE: { cause: 'too many open files', next: 'raise the limit (ulimit -n), then try again' },
  ENFILE: { cause: 'too many open files on the machine', next: 'close some programs, then try again' },
  EIO: { cause: 'an input/output error from the device', next: 'check the disk' },
  ENOTDIR: fileInTheWay,
  EISDIR: { cause: 'a directory is where a file is expected', next: 'give the path of a file' },
  ELOOP: { cause: 'a loop of symbolic links', next: 'fix the link, or give the path of the file itself' },
  ENAMETOOLONG: { cause: 'a file name is too long', next: 'give a shorter path' },
};

/**
 * An error of the machine (disk, permissions, ports, a missing program) as a CutoverError that
 * names where it happened, or undefined when `error` is not one. `where` says what was being done,
 * e.g. "writing .cutover/active.json" or "listening on 127.0.0.1:7400".
 */
export function environmentFault(error: unknown, where?: string): CutoverError | undefined {
  if (error instanceof CutoverError) return error.code === 'ENVIRONMENT_FAULT' ? error : undefined;
  const e = error as NodeJS.ErrnoException | undefined;
  const code = e?.code;
  if (typeof code !== 'string') return undefined;
  const at = where ?? (e ? describeErrnoTarget(e) : undefined);
  if (code === 'ENOENT' && e?.syscall?.startsWith('spawn')) {
    return new CutoverError(
      'ENVIRONMENT_FAULT',
      `${at ? `${at}: ` : ''}program not found${e.path ? `: ${e.path}` : ''}; install it or put it on the PATH`,
    );
  }
  const cause = environmentCause(e);
  if (!cause) return undefined;
  return new CutoverError('ENVIRONMENT_FAULT', `${at ? `${at}: ` : ''}${cause}`);
}

/**
 * What went wrong and what to do, without where: "the address is already in use (EADDRINUSE); stop
 * the program listening there, or choose another port"; undefined when `error` is no fault of the
 * machine. For a caller that names the place its own way (the router names a route's address).
 */
export function environmentCause(error: unknown): string | undefined {
  const e = error as NodeJS.ErrnoException | undefined;
  const code = e?.code;
  if (typeof code !== 'string') return undefined;
  // Binding a port is refused for another reason than a file: the port number, not a mode.
  const bySyscall = e?.syscall === 'listen' ? listenCauses : e?.syscall === 'mkdir' ? mkdirCauses : {};
  const known = bySyscall[code] ?? environmentCauses[code];
  return known ? `${known.cause} (${code}); ${known.next}` : undefined;
}

/** A directory cutover makes (recursively) where a file already is. */
const mkdirCauses: Record<string, { cause: string; next: string }> = {
  EEXIST: fileInTheWay,
};

const listenCauses: Record<string, { cause: string; next: string }> = {
  EACCES: {
    cause: 'permission denied',
    next: 'ports below 1024 need root or CAP_NET_BIND_SERVICE; choose a port above 1023',
  },
};

function describeErrnoTarget(e: NodeJS.ErrnoException): string | undefined {
  const withAddress = e as NodeJS.ErrnoException & { address?: string; port?: number };
  if (withAddress.address !== undefined) {
    const host = withAddress.address.includes(':') ? `[${withAddress.address}]` : withAddress.address;
    return `${e.syscall ?? 'listen'} ${withAddress.port !== undefined ? `${host}:${withAddress.port}` : host}`;
  }
  if (e.path) return `${e.syscall ?? 'access'} ${e.path}`;
  return e.syscall;
}
