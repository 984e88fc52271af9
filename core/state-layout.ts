/**
 * Where everything lives in a state directory: the one description of its layout (shown in
 * docs/state-directory.md), shared by the engine (engine/store/state-dir.ts) and by the router
 * program, which must not import the engine. Path building only, so it belongs to the pure core:
 * nothing here touches the disk. Paths are joined with `/` (cutover runs on POSIX systems).
 *
 *   environments/<env>/layout.json, layouts/<serial>.json, active.json
 *   environments/<env>/migrations/<id>/journal.ndjson, log.ndjson, notifications.ndjson, runner.json, runner.out, processes/, replication.json
 *   environments/<env>/slots/<slot id>/
 *   router/routes.json, router/router.json, router/control.json, router/pauses.json, router/router.out
 *   haproxy/haproxy.cfg, haproxy/routes.json, haproxy/haproxy.pid, haproxy/haproxy.sock, haproxy/haproxy.out
 *   server/idempotency/, server/hook-deliveries/
 *   watch/cache/, watch/trees/<env>/, watch/hooks/, watch/reports/<env>/
 *   secret-key (mode 0600: the key of the hashes that tell a changed secret)
 */

/** The files of one migration. */
export interface MigrationPaths {
  dir: string;
  /** Append-only, fsync'd: the source of truth of the migration. */
  journal: string;
  /** Notices, one JSON object per line: what `migration logs` shows. */
  log: string;
  /** The result of every notification delivery, one JSON object per line (engine/notify/). */
  notifications: string;
  /** The process driving the migration: pid and control address. */
  runner: string;
  /** Output of a detached runner (crashes included). */
  runnerOutput: string;
  /** Process groups that driver calls started and that still run: one file each. */
  processes: string;
  /**
   * The replication lag of its switched components as the health gate last measured it, written
   * atomically at most about once a second while the gate measures (not the record: the journal is).
   */
  replication: string;
}

export class StateLayout {
  /** The directory itself, without a trailing slash. */
  readonly root: string;

  constructor(root: string) {
    this.root = root === '' ? '.' : root.replace(/(.)\/+$/, '$1');
  }

  /** The directory, so that a StateLayout reads right in a message. */
  toString(): string {
    return this.root;
  }

  /** Every environment's directory is in here. */
  environmentsDir(): string {
    return this.join('environments');
  }

  environmentDir(environment: string): string {
    return this.join('environments', environment);
  }

  /** The layout live now; written atomically. */
  layoutFile(environment: string): string {
    return this.join('environments', environment, 'layout.json');
  }

  /** Every committed layout, by serial: the way back when layout.json is damaged. */
  layoutHistoryDir(environment: string): string {
    return this.join('environments', environment, 'layouts');
  }

  layoutHistoryFile(environment: string, serial: number): string {
    return this.join('environments', environment, 'layouts', `${serial}.json`);
  }

  /** Marks the one migration in flight in an environment. */
  activeFile(environment: string): string {
    return this.join('environments', environment, 'active.json');
  }

  migrationsDir(environment: string): string {
    return this.join('environments', environment, 'migrations');
  }

  migration(environment: string, id: string): MigrationPaths {
    const dir = this.join('environments', environment, 'migrations', id);
    return {
      dir,
      journal: `${dir}/journal.ndjson`,
      log: `${dir}/log.ndjson`,
      notifications: `${dir}/notifications.ndjson`,
      runner: `${dir}/runner.json`,
      runnerOutput: `${dir}/runner.out`,
      processes: `${dir}/processes`,
      replication: `${dir}/replication.json`,
    };
  }

  /** The process driver's slot: its record, its replicas' logs and data. */
  slotDir(environment: string, slotId: string): string {
    return this.join('environments', environment, 'slots', slotId);
  }

  routerDir(): string {
    return this.join('router');
  }

  /** The router's routing table (router/route-table.ts). */
  routingTableFile(): string {
    return this.join('router', 'routes.json');
  }

  /** How to reach the running router: pid, control port, token (router/router-record.ts). */
  routerRecordFile(): string {
    return this.join('router', 'router.json');
  }

  /** The router's fixed control address, kept by `cutover proxy --control-listen` (router/control-address.ts). */
  routerControlFile(): string {
    return this.join('router', 'control.json');
  }

  /** The routes an operator paused (`cutover proxy pause`, router/pauses.ts). */
  routerPausesFile(): string {
    return this.join('router', 'pauses.json');
  }

  /** What a router started by the engine printed (its crash, if it did not start). */
  routerOutputFile(): string {
    return this.join('router', 'router.out');
  }

  /**
   * The haproxy driver's directory: the configuration it writes and haproxy starts from
   * (`haproxy.cfg`), its record of the routes (`routes.json`), the master's pid file, the runtime
   * API socket and what haproxy printed (engine/drivers/haproxy-*.ts).
   */
  haproxyDir(): string {
    return this.join('haproxy');
  }

  /** The server's kept answers to Idempotency-Keys. */
  idempotencyDir(): string {
    return this.join('server', 'idempotency');
  }

  /** Webhook deliveries the server acted on, so that a replay does nothing. */
  hookDeliveriesDir(): string {
    return this.join('server', 'hook-deliveries');
  }

  /** The watcher's clones of remote repositories. */
  watchCacheDir(): string {
    return this.join('watch', 'cache');
  }

  /** The commits the watcher exported for an environment's migrations, one directory each. */
  watchTreesDir(environment: string): string {
    return this.join('watch', 'trees', environment);
  }

  /** Webhook triggers, from the server to the watcher. */
  watchHooksDir(): string {
    return this.join('watch', 'hooks');
  }

  /** The watcher's reports of an environment (without `--out`): plans, saved plans, outcomes. */
  watchReportsDir(environment: string): string {
    return this.join('watch', 'reports', environment);
  }

  /**
   * The key of the keyed hashes (HMAC-SHA256) recorded for secrets, created on first use with mode
   * 0600: a changed secret is told from its hash, and the hash is worthless without this key.
   */
  secretKeyFile(): string {
    return this.join('secret-key');
  }

  private join(...parts: string[]): string {
    return this.root === '/' ? `/${parts.join('/')}` : `${this.root}/${parts.join('/')}`;
  }
}
