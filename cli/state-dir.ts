import type { Command } from 'commander';
import { StateDir } from '../engine/store/state-dir.js';

export interface StateDirOptions {
  file?: string;
  stateDir?: string;
}

/** `-f FILE` (state beside it) and `--state-dir DIR`, for commands that act on migrations. */
export function addStateDirOptions(command: Command): Command {
  return command
    .option(
      '-f, --file <file>',
      'a topology file; its state directory (.cutover/ beside it) is used',
      'topology.yaml',
    )
    .option(
      '--state-dir <dir>',
      'the state directory (default: CUTOVER_STATE_DIR, else .cutover/ beside the file)',
    );
}

/** `env`: CUTOVER_STATE_DIR's; the options' paths as the engine takes them (see cli/context.ts). */
export function resolveStateDir(options: StateDirOptions, env: NodeJS.ProcessEnv): StateDir {
  if (options.stateDir) return StateDir.at(options.stateDir);
  return StateDir.for(options.file ?? 'topology.yaml', env);
}
