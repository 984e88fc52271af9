/**
 * Real PostgreSQL clusters for the postgres driver's tests: a state directory the server's user can
 * reach, contexts, clients and a writer that counts its acknowledged inserts. Everything started
 * is stopped (by pid) and removed by the Resources it is given.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestContext } from 'vitest';
import type { Component, PostgresDriverSpec } from '../../../core/topology/types.js';
import { createPostgresDriver } from '../../../engine/drivers/postgres-driver.js';
import { postgresSettings } from '../../../engine/drivers/postgres-settings.js';
import { type Connection, literal, query } from '../../../engine/drivers/postgres-sql.js';
import { stopProcessGroup } from '../../../engine/drivers/process-group.js';
import type {
  ComponentCallContext,
  ComponentDriver,
  DriverCallOptions,
  SlotInfo,
} from '../../../engine/drivers/types.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { Resources } from '../../support/resources.js';

/** The application's schema: a uniquely keyed table with a serial id. */
export const initSql = `CREATE TABLE items (id serial PRIMARY KEY, k text UNIQUE NOT NULL, at timestamptz NOT NULL DEFAULT now());\n`;

/**
 * What the test \`t\` started (its clusters, writers, directories), stopped when it ends. Each test
 * has its own, so that the tests can run at once (\`it.concurrent\`), each on clusters of its own in
 * a directory of its own: most of their time is spent waiting on PostgreSQL (an initdb, a copy, a
 * fence's deadline), not in this process. Such a test asserts with its context's \`expect\` (\`t.expect\`),
 * so that a failure is reported on it, not on another test running at the same time.
 */
export function resourcesOf(t: TestContext): Resources {
  const resources = new Resources();
  t.onTestFinished(() => resources.cleanup(), 60_000);
  return resources;
}

export interface PgWorkspace {
  base: string;
  stateDir: StateDir;
  driver: ComponentDriver;
  resources: Resources;
  log: string[];
}

/**
 * A temp directory (open to the server's user: traversable by others) with its state dir; every
 * slot provisioned through `provision` is stopped by its pid at cleanup.
 */
export async function pgWorkspace(resources: Resources): Promise<PgWorkspace> {
  const base = await mkdtemp(path.join(tmpdir(), 'cutover-pg-'));
  await chmod(base, 0o711);
  await writeFile(path.join(base, 'init.sql'), initSql);
  resources.add(() => rm(base, { recursive: true, force: true }));
  return {
    base,
    stateDir: StateDir.at(path.join(base, '.cutover')),
    driver: createPostgresDriver(),
    resources,
    log: [],
  };
}

export function pgContext(
  ws: PgWorkspace,
  migrationId: string,
  driver: Partial<PostgresDriverSpec> = {},
): ComponentCallContext {
  const spec: Component = {
    driver: 'pg',
    version: migrationId,
    env: {},
    replicas: 1,
    placement: { labels: {} },
    dependsOn: [],
    stateful: true,
  };
  return {
    environment: 'test-env',
    migrationId,
    component: 'db',
    spec,
    driver: { type: 'postgres', database: 'app', user: 'app', init: 'init.sql', ...driver },
    baseDir: ws.base,
    stateDir: ws.stateDir,
  };
}

export function callOptions(ws: PgWorkspace, signal = AbortSignal.timeout(120_000)): DriverCallOptions {
  return { signal, log: (line) => ws.log.push(line) };
}

/** A provisioned slot, stopped by its recorded pid when the test ends. */
export async function provision(
  ws: PgWorkspace,
  ctx: ComponentCallContext,
  slot: 'blue' | 'green',
): Promise<SlotInfo> {
  const info = await ws.driver.provision(ctx, slot, callOptions(ws));
  const pid = info.details?.pid as number;
  const startTime = (info.details?.startTime as string | null) ?? null;
  ws.resources.add(async () => {
    try {
      await ws.driver.retire(ctx, info, callOptions(ws, AbortSignal.timeout(20_000)));
    } finally {
      await stopProcessGroup({ pid, startTime }, 1_000);
    }
  });
  return info;
}

export function portOfSlot(slot: SlotInfo): number {
  return slot.details?.port as number;
}

/** A connection to the application's database of a slot, as `user` (the app role by default). */
export async function connect(ctx: ComponentCallContext, slot: SlotInfo, user = 'app'): Promise<Connection> {
  const { bin } = await postgresSettings(ctx);
  return { bin, port: portOfSlot(slot), database: 'app', user };
}

export async function sql(conn: Connection, text: string): Promise<string[][]> {
  return query(conn, text, AbortSignal.timeout(30_000));
}

/**
 * Inserts uniquely keyed rows one after another through one psql session (as the application
 * would through a pooled connection), into the slot `port` names at the time: a test moves it as
 * the router would move traffic. An insert counts as acknowledged when its row came back; a lost
 * session is opened again.
 */
export class Writer {
  readonly acked: { key: string; port: number }[] = [];
  readonly errors: string[] = [];
  private child: ChildProcess | undefined;
  private childPort = 0;
  private stdout = '';
  private stderr = '';
  private pending: ((line: string | null) => void) | undefined;
  private running = false;
  private loop: Promise<void> | undefined;
  private next = 0;

  constructor(
    private readonly bin: string,
    public port: number,
    private readonly prefix: string,
    private readonly pauseMs = 5,
  ) {}

  start(): void {
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    this.close();
  }

  ackedOn(port: number): number {
    return this.acked.filter((a) => a.port === port).length;
  }

  private async run(): Promise<void> {
    while (this.running) {
      const key = `${this.prefix}-${this.next++}`;
      const port = this.port;
      if (await this.insert(key, port)) this.acked.push({ key, port });
      await sleep(this.pauseMs);
    }
  }

  private insert(key: string, port: number): Promise<boolean> {
    if (this.child && this.childPort !== port) this.close();
    const child = this.child ?? this.open(port);
    return new Promise((resolve) => {
      let acked = false;
      this.pending = (line) => {
        if (line === key) acked = true;
        else if (line === `@@${key}` || line === null) {
          this.pending = undefined;
          resolve(acked && line !== null);
        }
      };
      child.stdin?.write(`INSERT INTO items (k) VALUES ('${key}') RETURNING k;\n\\echo @@${key}\n`);
    });
  }

  private open(port: number): ChildProcess {
    const child = spawn(
      path.join(this.bin, 'psql'),
      ['-X', '-q', '-A', '-t', '-h', '127.0.0.1', '-p', String(port), '-U', 'app', '-d', 'app'],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    this.child = child;
    this.childPort = port;
    child.stdin.on('error', () => {});
    child.stdout.on('data', (chunk: Buffer) => {
      this.stdout += chunk.toString('utf8');
      let nl = this.stdout.indexOf('\n');
      while (nl >= 0) {
        const line = this.stdout.slice(0, nl);
        this.stdout = this.stdout.slice(nl + 1);
        this.pending?.(line);
        nl = this.stdout.indexOf('\n');
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString('utf8');
      let nl = this.stderr.indexOf('\n');
      while (nl >= 0) {
        this.errors.push(this.stderr.slice(0, nl));
        this.stderr = this.stderr.slice(nl + 1);
        nl = this.stderr.indexOf('\n');
      }
    });
    child.on('close', () => {
      if (this.child === child) this.child = undefined;
      this.stdout = '';
      this.pending?.(null);
    });
    return child;
  }

  private close(): void {
    const child = this.child;
    this.child = undefined;
    if (child && child.exitCode === null && child.signalCode === null) {
      child.stdin?.end();
      child.kill('SIGKILL');
    }
  }
}

/**
 * A psql session as the app role that opens a write transaction and leaves it open until
 * `end()`: the long transaction a fence must wait for.
 */
export async function openWriteTransaction(
  conn: Connection,
  key: string,
): Promise<{ end: () => Promise<void> }> {
  const child = spawn(
    path.join(conn.bin, 'psql'),
    [
      '-X',
      '-q',
      '-A',
      '-t',
      '-h',
      '127.0.0.1',
      '-p',
      String(conn.port),
      '-U',
      conn.user,
      '-d',
      conn.database,
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
  });
  child.stdin.write(`BEGIN;\nINSERT INTO items (k) VALUES ('${key}') RETURNING k;\n`);
  const until = Date.now() + 10_000;
  while (!out.includes(key)) {
    if (Date.now() > until || child.exitCode !== null)
      throw new Error(`the write transaction did not start: ${out}`);
    await sleep(20);
  }
  return {
    end: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const closed = new Promise((resolve) => child.once('close', resolve));
      child.kill('SIGKILL');
      await closed;
    },
  };
}

/**
 * A gate on what the follower's replication workers write (its initial copy and its apply): while
 * the gate's file exists, every row they insert into `items` waits, after `delayMs` (a throttle)
 * — the test decides when the follower goes on, whatever the machine's load, instead of slowing it
 * and hoping the timing holds. The application's own writes never wait.
 */
export interface ReplicaGate {
  /** The trigger to make (as the superuser): an ALWAYS trigger, so the workers fire it; made on blue it reaches green with the schema. */
  sql: string;
  close(): Promise<void>;
  open(): Promise<void>;
}

export function replicaGate(ws: PgWorkspace, delayMs = 0): ReplicaGate {
  // In the workspace, which the server's user can traverse (0711); the workers run as the
  // subscription's owner, the superuser, who may stat it.
  const file = path.join(ws.base, 'replica-gate-closed');
  ws.resources.add(() => rm(file, { force: true }));
  return {
    sql: `CREATE FUNCTION gate() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF current_setting('session_replication_role') = 'replica' THEN
      PERFORM pg_sleep(${delayMs / 1000});
      WHILE (pg_stat_file(${literal(file)}, true)).size IS NOT NULL LOOP
        PERFORM pg_sleep(0.02);
      END LOOP;
    END IF;
    RETURN NEW;
  END $$;
CREATE TRIGGER gate BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION gate();
ALTER TABLE items ENABLE ALWAYS TRIGGER gate;`,
    close: () => writeFile(file, ''),
    open: () => rm(file, { force: true }),
  };
}
