import { cp, stat } from 'node:fs/promises';
import path from 'node:path';
import { type DriverCallOptions, PermanentDriverError } from './types.js';

/** Copies `data/<dataDir>` of blue's slot into green's, keeping modes and timestamps. */
export async function copyDataDir(
  fromDir: string,
  toDir: string,
  dataDir: string,
  options: DriverCallOptions,
) {
  const fromData = path.join(fromDir, 'data');
  const source = path.resolve(fromData, dataDir);
  const relative = path.relative(fromData, source);
  if (relative.startsWith('..') || path.isAbsolute(relative)) {
    throw new PermanentDriverError(`replicate.dataDir ${dataDir} is outside the slot's data directory`);
  }
  if (!(await stat(fromData).catch(() => undefined))?.isDirectory()) {
    throw new PermanentDriverError(`the live slot has no data directory ${fromData} to copy from`);
  }
  if (!(await stat(source).catch(() => undefined))) {
    options.log(`${source} does not exist (nothing written there yet); nothing to copy`);
    return;
  }
  const target = path.join(toDir, 'data', relative);
  await cp(source, target, {
    recursive: true,
    preserveTimestamps: true,
    force: true,
    verbatimSymlinks: true,
  });
  options.log(`copied ${source} to ${target}`);
}
