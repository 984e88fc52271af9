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

  /** `CUTOVER_STATE_DIR`, else `.cutover/` beside the topology file. */
  static for(topologyFile: string, env: NodeJS.ProcessEnv = process.env): StateDir {
    return StateDir.at(stateDirFor(topologyFile, env));
  }
}

/** The state directory: `CUTOVER_STATE_DIR`, else `.cutover/` beside the topology file. */
function stateDirFor(topologyFile: string, env: NodeJS.ProcessEnv = process.env): string {
  const override = env.CUTOVER_STATE_DIR;
  if (override) return path.resolve(override);
  return path.join(path.dirname(path.resolve(topologyFile)), '.cutover');
}
