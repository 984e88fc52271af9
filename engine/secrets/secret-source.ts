import { lstat, readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { CutoverError, environmentFault } from '../../core/errors.js';

/** The prefix of the environment variables that hold secrets: `CUTOVER_SECRET_DB_PASSWORD`. */
export const secretEnvPrefix = 'CUTOVER_SECRET_';
/** The environment variable naming the secrets file (what `--secrets-file` sets). */
export const secretsFileEnv = 'CUTOVER_SECRETS_FILE';
/** Permission bits a secrets file must not have: any access by the group or by others. */
const groupOrOtherBits = 0o077;

/**
 * Where the secrets of a topology are read, in the process that applies it (a runner, a Temporal
 * worker, a server): `$CUTOVER_SECRET_<NAME>` of its environment first, then the line `NAME=value`
 * of the secrets file `$CUTOVER_SECRETS_FILE`. The file is read once per source and refused when it
 * lies inside the topology's Git work tree or other users may read it. Nothing here ever puts a
 * value into a message.
 */
export interface SecretSource {
  /** The secret's value, or undefined when it is set nowhere. Throws (USAGE) on a refused file. */
  lookup(name: string): Promise<string | undefined>;
  /** Where `name` was looked for, for the message of a missing secret. */
  lookedIn(name: string): string;
}

/**
 * The secrets of one process: its `CUTOVER_SECRET_*` variables and its secrets file, decided once
 * where the process starts (the CLI from its command's environment and `--secrets-file`, a server,
 * a worker, a runner from theirs) and handed down to whatever reads secrets in it. Nothing below
 * that edge reads the process's environment for them.
 */
export interface ProcessSecrets {
  /** Where a topology's secrets are read; `topologyDir`: its directory (the secrets file is refused inside its Git work tree). */
  for(topologyDir: string): SecretSource;
  /** The variables a process this one starts (a runner) needs to read the same secrets. */
  readonly env: Readonly<Record<string, string>>;
}

/** The secrets `env` gives: its `CUTOVER_SECRET_*` and its `CUTOVER_SECRETS_FILE` (absolute). */
export function processSecrets(env: NodeJS.ProcessEnv): ProcessSecrets {
  const own: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (key.startsWith(secretEnvPrefix)) own[key] = value;
    else if (key === secretsFileEnv && value !== '') own[key] = path.resolve(value);
  }
  return { env: own, for: (topologyDir) => secretSource(own, topologyDir) };
}

/** No secrets at all (a process that reads none: a test's runner, a look at what runs). */
export const noSecrets: ProcessSecrets = processSecrets({});

export function secretSource(env: NodeJS.ProcessEnv, topologyDir: string): SecretSource {
  const fileSetting = env[secretsFileEnv];
  const file = fileSetting ? path.resolve(fileSetting) : undefined;
  let entries: Promise<Map<string, string>> | undefined;
  return {
    async lookup(name) {
      const fromEnv = env[`${secretEnvPrefix}${name}`];
      if (fromEnv !== undefined) return fromEnv;
      if (!file) return undefined;
      entries ??= readSecretsFile(file, topologyDir);
      return (await entries).get(name);
    },
    lookedIn(name) {
      const inFile = file ? `the secrets file ${file}` : `no secrets file (${secretsFileEnv} is not set)`;
      return `$${secretEnvPrefix}${name} of process ${process.pid} (unset) and ${inFile}`;
    },
  };
}

async function readSecretsFile(file: string, topologyDir: string): Promise<Map<string, string>> {
  await checkSecretsFile(file, topologyDir);
  try {
    return parseDotenv(await readFile(file, 'utf8'), file);
  } catch (error) {
    throw environmentFault(error, `secrets file ${file}`) ?? error;
  }
}

/** Refuses a file that is not there, that Git could carry away, or that another user can read. */
export async function checkSecretsFile(file: string, topologyDir: string): Promise<void> {
  const info = await stat(file).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') {
      throw usage(
        `secrets file ${file} does not exist; create it (NAME=value lines, mode 0600) or correct --secrets-file / ${secretsFileEnv}`,
      );
    }
    throw environmentFault(error, `secrets file ${file}`) ?? error;
  });
  if (!info.isFile()) throw usage(`secrets file ${file} is not a file; give a file of NAME=value lines`);
  const mode = info.mode & 0o777;
  if ((mode & groupOrOtherBits) !== 0) {
    throw usage(
      `secrets file ${file} is open to other users (mode ${mode.toString(8).padStart(4, '0')}); run chmod 600 ${file}`,
    );
  }
  const workTree = await gitWorkTreeOf(topologyDir);
  if (workTree === undefined) return;
  const real = await realpath(file);
  if (real.startsWith(`${workTree}${path.sep}`)) {
    throw usage(
      `secrets file ${file} is inside the topology's Git work tree ${workTree}; move it outside (e.g. ~/.config/cutover/) so it is never committed`,
    );
  }
}

/** The directory holding `.git` at or above `dir` (real path), if any. */
async function gitWorkTreeOf(dir: string): Promise<string | undefined> {
  let at = await realpath(dir).catch(() => path.resolve(dir));
  for (;;) {
    if (
      await lstat(path.join(at, '.git')).then(
        () => true,
        () => false,
      )
    )
      return at;
    const up = path.dirname(at);
    if (up === at) return undefined;
    at = up;
  }
}

/**
 * The dotenv subset cutover reads: `NAME=value` lines, an optional `export ` before the name, blank
 * lines and `#` comments; a value wholly in single or double quotes loses them, nothing else is
 * interpreted. An error names the file and line, never the line's text (it may hold a secret).
 */
export function parseDotenv(text: string, file: string): Map<string, string> {
  const entries = new Map<string, string>();
  const lines = text.split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$/.exec(line);
    if (!match) {
      throw usage(`secrets file ${file}:${index + 1}: expected NAME=value (a name of letters, digits and _)`);
    }
    const value = (match[2] as string).trim();
    // No process environment can carry a NUL byte, and Node's refusal to spawn with one quotes the
    // value: refuse it here, by file, line and name, before it can reach a message.
    if (value.includes('\0')) {
      throw usage(
        `secrets file ${file}:${index + 1}: the value of ${match[1]} holds a NUL byte, which no process environment can carry; correct that line`,
      );
    }
    const quoted = value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.at(-1) === value[0];
    entries.set(match[1] as string, quoted ? value.slice(1, -1) : value);
  }
  return entries;
}

function usage(message: string): CutoverError {
  return new CutoverError('USAGE', message);
}
