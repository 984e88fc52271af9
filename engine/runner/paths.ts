import path from 'node:path';

/** Where an environment's migrations live in the state directory. */
export function environmentDir(stateDir: string, environment: string): string {
  return path.join(stateDir, 'environments', environment);
}

export function migrationsDir(stateDir: string, environment: string): string {
  return path.join(environmentDir(stateDir, environment), 'migrations');
}

export interface MigrationPaths {
  dir: string;
  /** Append-only, fsync'd: the source of truth of the migration. */
  journal: string;
  /** Notices, one JSON object per line: what `migration logs` shows. */
  log: string;
  /** The process driving the migration: pid and control address. */
  runner: string;
  /** Output of a detached runner (crashes included). */
  runnerOutput: string;
  /** Process groups that driver calls started and that still run: one file each. */
  processes: string;
}

export function migrationPaths(stateDir: string, environment: string, id: string): MigrationPaths {
  const dir = path.join(migrationsDir(stateDir, environment), id);
  return {
    dir,
    journal: path.join(dir, 'journal.ndjson'),
    log: path.join(dir, 'log.ndjson'),
    runner: path.join(dir, 'runner.json'),
    runnerOutput: path.join(dir, 'runner.out'),
    processes: path.join(dir, 'processes'),
  };
}

/** Marks the one migration in flight in an environment. */
export function activePath(stateDir: string, environment: string): string {
  return path.join(environmentDir(stateDir, environment), 'active.json');
}
