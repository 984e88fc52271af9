import path from 'node:path';
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

export function resolveStateDir(options: StateDirOptions, env: NodeJS.ProcessEnv = process.env): StateDir {
  const topologyDir = path.dirname(path.resolve(options.file ?? 'topology.yaml'));
  return StateDir.of({ given: options.stateDir, env, topologyDir });
}
