import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { StateLayout } from '../core/state-layout.js';
import type { PauseSpec } from './control-types.js';

/**
 * The routes an operator paused (`cutover proxy pause`), kept in `<stateDir>/router/pauses.json`
 * (route key → PauseSpec) so that a router started again while one is paused holds its requests
 * too: a maintenance is not ended by a crash. Written by the router only.
 */
export function pausesPath(stateDir: string): string {
  return new StateLayout(stateDir).routerPausesFile();
}

/** The pauses kept; none when the file is missing or unreadable (said through `log`). */
export function readPauses(stateDir: string, log: (line: string) => void): Map<string, PauseSpec> {
  const file = pausesPath(stateDir);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
      log(`router: ${file} not read (${(error as Error).message}): no route is paused`);
    return new Map();
  }
  const pauses = new Map<string, PauseSpec>();
  try {
    for (const [key, value] of Object.entries(JSON.parse(text) as Record<string, Partial<PauseSpec>>)) {
      const { since, timeoutMs, maxHeld } = value;
      if (typeof since === 'number' && typeof timeoutMs === 'number' && typeof maxHeld === 'number')
        pauses.set(key, { since, timeoutMs, maxHeld });
    }
  } catch (error) {
    log(`router: ${file} is not JSON (${(error as Error).message}): no route is paused`);
  }
  return pauses;
}

/** Replaces the file atomically (removed pauses included). */
export function writePauses(stateDir: string, pauses: ReadonlyMap<string, PauseSpec>): void {
  const file = pausesPath(stateDir);
  mkdirSync(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(Object.fromEntries(pauses), null, 2)}\n`);
  renameSync(temp, file);
}
