// Compiles the sources into dist/ (run by `npm run build`), unless dist/ is newer than every source:
// `npm ci` builds (prepare) and `npm test` builds again, and tsc's own incremental check of an
// unchanged tree still costs ~6 CPU-seconds (it parses every file to compare them).
import { spawnSync } from 'node:child_process';
import { utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { upToDate } from './up-to-date.mjs';

const root = (name) => fileURLToPath(new URL(`../${name}`, import.meta.url));
const stamp = root('dist/.tsbuildinfo');
const sources = ['core', 'platform', 'router', 'engine', 'views', 'cli', 'server', 'watch', 'schemas'];
const inputs = [...sources, 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'].map(root);
if (upToDate(stamp, inputs)) process.exit(0);
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', root('tsconfig.build.json')], { stdio: 'inherit' });
if (result.status !== 0) process.exit(result.status ?? 1);
// tsc leaves its build info as it was when no output changed (a file saved unchanged): mark the
// check done, so the next build skips it.
const now = new Date();
utimesSync(stamp, now, now);
