import { spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import path from 'node:path';
import { defaults, type PostgresDriverSpec } from '../../core/topology/types.js';
import { findProgram, isExecutable, pathDirs } from './find-program.js';
import { type ComponentCallContext, PermanentDriverError } from './types.js';

/** Where Debian installs each major version's server programs. */
const debianRoot = '/usr/lib/postgresql';
/** The user Debian's postgresql-common package creates; the server refuses to run as root. */
const debianServerUser = 'postgres';
/** The superuser initdb makes in every cluster; the driver's own connections use it. */
export const superuser = 'postgres';

/** An OS user the server runs as: spawn's uid/gid, and HOME for its tools. */
export interface OsUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

/** The driver's settings as the runner resolves them on its machine. */
export interface PostgresSettings {
  bin: string;
  database: string;
  user: string;
  init?: string;
  /** null: the runner's own user runs the server. */
  runAs: OsUser | null;
}

/**
 * The settings of the component's postgres driver: the topology's, with the machine's defaults
 * filled in (the server programs' directory, the OS user). A missing program or user is a
 * PermanentDriverError that says what to do.
 */
export async function postgresSettings(ctx: ComponentCallContext): Promise<PostgresSettings> {
  const spec: Partial<PostgresDriverSpec> = ctx.driver.type === 'postgres' ? ctx.driver : {};
  const bin = spec.bin !== undefined ? path.resolve(ctx.baseDir, spec.bin) : await findServerBin();
  if (!(await isExecutable(path.join(bin, 'initdb')))) {
    throw new PermanentDriverError(
      `PostgreSQL's initdb is not in ${bin}: install Debian's postgresql-15 (apt-get install postgresql-15) or set the postgres driver's \`bin\` to the directory of initdb, pg_ctl and postgres`,
    );
  }
  const settings: PostgresSettings = {
    bin,
    database: spec.database ?? defaults.postgresDatabase,
    user: spec.user ?? defaults.postgresUser,
    runAs: await serverUser(spec.runAs),
  };
  if (spec.init !== undefined) settings.init = path.resolve(ctx.baseDir, spec.init);
  return settings;
}

/** Debian's newest server version, else the first directory of the PATH that holds initdb. */
async function findServerBin(): Promise<string> {
  const versions = await readdir(debianRoot).catch(() => [] as string[]);
  const newest = versions
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a))
    .map((v) => path.join(debianRoot, v, 'bin'));
  const initdb = await findProgram('initdb', [...newest, ...pathDirs()]);
  if (initdb !== null) return path.dirname(initdb);
  throw new PermanentDriverError(
    `PostgreSQL's server programs (initdb) are neither in ${debianRoot}/<version>/bin nor on the PATH: install Debian's postgresql-15 (apt-get install postgresql-15) or set the postgres driver's \`bin\``,
  );
}

/**
 * The OS user that runs initdb and the server: `runAs`, else the runner's user, else (the runner is
 * root, which PostgreSQL refuses) `postgres`. null: the runner's own user.
 */
async function serverUser(runAs: string | undefined): Promise<OsUser | null> {
  const me = userInfo();
  const name = runAs ?? (me.uid === 0 ? debianServerUser : me.username);
  if (name === me.username && me.uid !== 0) return null;
  if (name === 'root' || (name === me.username && me.uid === 0)) {
    throw new PermanentDriverError(
      'PostgreSQL refuses to run as root: set the postgres driver\'s `runAs` to another OS user (Debian\'s package creates "postgres")',
    );
  }
  if (me.uid !== 0) {
    throw new PermanentDriverError(
      `the postgres driver's runAs is ${name}, but cutover runs as ${me.username}, which cannot start programs as another user: run cutover as ${name}, or leave runAs out`,
    );
  }
  const entry = await getent(name);
  if (!entry) {
    throw new PermanentDriverError(
      `the OS user ${name} that runs PostgreSQL does not exist: create it (useradd --system ${name}), install Debian's postgresql-15 (which creates "postgres"), or set the postgres driver's \`runAs\``,
    );
  }
  return entry;
}

/**
 * The passwd entry of `name`: /etc/passwd, else getent (which reads every source the machine is set
 * up with; a process to start, so second).
 */
async function getent(name: string): Promise<OsUser | null> {
  const local = (await readFile('/etc/passwd', 'utf8').catch(() => ''))
    .split('\n')
    .map((line) => line.split(':'))
    .find((fields) => fields[0] === name && fields.length >= 7);
  if (local) return { name, uid: Number(local[2]), gid: Number(local[3]), home: local[5] ?? '/' };
  return new Promise((resolve) => {
    const child = spawn('getent', ['passwd', name], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    child.on('error', () => resolve(null));
    child.on('close', (code) => {
      const fields = out.trim().split(':');
      if (code !== 0 || fields.length < 7) return resolve(null);
      resolve({ name, uid: Number(fields[2]), gid: Number(fields[3]), home: fields[5] ?? '/' });
    });
  });
}
