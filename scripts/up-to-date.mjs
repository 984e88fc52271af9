// Whether a build step's output is newer than all of its inputs, so `npm run build` (which
// `npm test` runs after `npm ci` already built) redoes only what an edit made stale.
// scripts/build-ts.mjs rewrites only the outputs whose source changed.
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/** The newest modification time under `input` (a file, or a directory walked for files). */
function newest(input, skip) {
  let stat;
  try {
    stat = statSync(input);
  } catch {
    return Number.POSITIVE_INFINITY; // a missing input: rebuild, and let the step say why
  }
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = 0;
  for (const entry of readdirSync(input, { recursive: true, encoding: 'utf8' })) {
    const file = path.join(input, entry);
    if (skip(file)) continue;
    const entryStat = statSync(file, { throwIfNoEntry: false });
    if (entryStat?.isFile() && entryStat.mtimeMs > latest) latest = entryStat.mtimeMs;
  }
  return latest;
}

/** True when `output` exists and is newer than every file of `inputs` but those `skip` names. */
export function upToDate(output, inputs, skip = () => false) {
  const made = statSync(output, { throwIfNoEntry: false });
  if (!made) return false;
  return inputs.every((input) => newest(input, skip) < made.mtimeMs);
}
