import path from 'node:path';
import { StateLayout } from '../../core/state-layout.js';

export type { MigrationPaths } from '../../core/state-layout.js';

/**
 * The state directory: the one object the engine passes around for it, owning every path inside it
 * (core/state-layout.ts describes the layout). Its root is absolute, resolved once when it is made,
 * so a path taken from it means the same file whatever the process's working directory.
 */
export class StateDir extends StateLayout {
  private constructor(root: string) {
    super(root);
  }

  /** The state directory at `dir`, resolved against the working directory. */
  static at(dir: string): StateDir {
    return new StateDir(path.resolve(dir));
  }

  /** `CUTOVER_STATE_DIR`, else `.cutover/` beside the topology file (`stateDirPath`). */
  static for(topologyFile: string, env: NodeJS.ProcessEnv = process.env): StateDir {
    return StateDir.at(stateDirPath({ env, topologyDir: path.dirname(path.resolve(topologyFile)) }));
  }

  /** The state directory `stateDirPath` names. */
  static of(where: StateDirWhere): StateDir {
    return StateDir.at(stateDirPath(where));
  }
}

/** What decides the state directory of a process. */
export interface StateDirWhere {
  /** `--state-dir`, when given. */
  given?: string | undefined;
  /** The process's environment (CUTOVER_STATE_DIR). */
  env: NodeJS.ProcessEnv;
  /**
   * Where the process's topologies live: the topology file's directory (a command given `-f`),
   * the server's `--workdir`, the directory of each file in a watcher's work tree; for a process
   * with no topology of its own (a worker, a watcher of a remote), its working directory.
   */
  topologyDir: string;
}

/**
 * The one rule for where a process keeps its state: `--state-dir` when given, else
 * `CUTOVER_STATE_DIR`, else `.cutover/` in the directory its topologies live in. Absolute.
 */
export function stateDirPath(where: StateDirWhere): string {
  if (where.given) return path.resolve(where.given);
  const override = where.env.CUTOVER_STATE_DIR;
  if (override) return path.resolve(override);
  return path.join(path.resolve(where.topologyDir), '.cutover');
}
