/**
 * `npm run bench` (after a build): runs every bench module in turn, prints one table per bench and
 * writes its results to bench/results/<name>.json.
 *
 *   node bench/run.js [--quick] [--ratios] [name ...]     BENCH_QUICK=1 is the same as --quick
 *
 * A bench module exports `name`, `title`, optionally `columns` ([{ key, label, format }]), and
 * `async run({ quick, ratios, log })`, which returns its rows, or `{ rows, goals, notes, ... }` when
 * it has goals to judge. A goal is `{ label, value, unit?, target, limit?, pass, fail, detail? }`
 * (support.js builds them), or `{ label, target, skipped }` when it could not be measured.
 * `--quick` skips the largest sizes; `--ratios` measures only the goals that are ratios of two
 * figures taken side by side in the same run (plan: diff + plan against parse + validate; router:
 * against nginx; parallel: against the critical path), which hold on a busy machine as well as on
 * a quiet one: `npm run bench:quick` is `--quick --ratios plan router parallel`, part of the tests.
 *
 * Each goal is reported PASS (met), MISS (missed, but within its wide margin: noise on a shared
 * machine is not a failure) or FAIL (missed beyond `limit`: a regression). The exit code is 1 when
 * a goal FAILs or a bench fails to run, 0 otherwise.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import * as containerBench from './container-bench.js';
import * as logStreamBench from './log-stream-bench.js';
import * as migrationBench from './migration-bench.js';
import * as parallelBench from './parallel-bench.js';
import * as parallelTemporalBench from './parallel-temporal-bench.js';
import * as planBench from './plan-bench.js';
import * as routerBench from './router-bench.js';
import * as routerClientBench from './router-client-bench.js';
import * as routerTlsBench from './router-tls-bench.js';
import * as serverBench from './server-bench.js';
import * as statefulBench from './stateful-bench.js';
import { cleanUpEverything } from './support.js';
import * as temporalBench from './temporal-bench.js';
import * as watchBench from './watch-bench.js';
import * as writeHoldBench from './write-hold-bench.js';

const benches = [
  planBench,
  migrationBench,
  parallelBench,
  routerBench,
  routerTlsBench,
  routerClientBench,
  writeHoldBench,
  statefulBench,
  serverBench,
  logStreamBench,
  watchBench,
  temporalBench,
  parallelTemporalBench,
  containerBench,
];

const args = process.argv.slice(2);
const quick = args.includes('--quick') || process.env.BENCH_QUICK === '1';
const ratios = args.includes('--ratios');
const only = args.filter((a) => !a.startsWith('--'));
const resultsDir = fileURLToPath(new URL('./results/', import.meta.url));

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    cleanUpEverything();
    process.exit(130);
  });
}

const unknown = only.filter((n) => !benches.some((b) => b.name === n));
if (unknown.length > 0) {
  console.error(`unknown bench: ${unknown.join(', ')} (known: ${benches.map((b) => b.name).join(', ')})`);
  process.exit(2);
}

const machine = {
  node: process.version,
  platform: `${process.platform}-${process.arch}`,
  cpu: cpus()[0]?.model ?? 'unknown',
  cpus: cpus().length,
  memoryGiB: Math.round(totalmem() / 2 ** 30),
  // Other work on the machine skews every figure; the load average at the start tells a reader.
  loadAverage1m: Number(loadavg()[0].toFixed(2)),
};
const mode = [quick ? 'quick: largest sizes skipped' : '', ratios ? 'ratios only' : ''].filter(Boolean);
console.log(`cutover benchmarks${mode.length > 0 ? ` (${mode.join('; ')})` : ''}`);
console.log(
  `node ${machine.node}, ${machine.platform}, ${machine.cpus} × ${machine.cpu}, ${machine.memoryGiB} GiB, ` +
    `load average ${machine.loadAverage1m}`,
);

let failed = false;
const goalsFailed = [];
for (const bench of benches.filter((b) => only.length === 0 || only.includes(b.name))) {
  const started = new Date();
  let outcome;
  try {
    outcome = await bench.run({ quick, ratios, log: (line) => process.stderr.write(`  … ${line}\n`) });
  } catch (error) {
    failed = true;
    console.error(`\nbench ${bench.name} failed: ${error?.stack ?? error}`);
    continue;
  } finally {
    cleanUpEverything();
  }
  const result = Array.isArray(outcome) ? { rows: outcome } : outcome;
  console.log(`\n${bench.title ?? bench.name}`);
  console.log(formatTable(result.rows, bench.columns));
  for (const note of result.notes ?? []) console.log(`  note: ${note}`);
  for (const goal of result.goals ?? []) {
    console.log(formatGoal(goal));
    if (!goal.skipped && goal.fail !== false) goalsFailed.push(`${bench.name}: ${goal.label}`);
  }
  await mkdir(resultsDir, { recursive: true });
  const file = `${resultsDir}${bench.name}.json`;
  const json = { bench: bench.name, quick, ratios, startedAt: started.toISOString(), machine, ...result };
  await writeFile(file, `${JSON.stringify(json, null, 2)}\n`);
  console.log(`  results: bench/results/${bench.name}.json`);
}
if (goalsFailed.length > 0) {
  console.error(`\n${goalsFailed.length} goal(s) missed by a wide margin:`);
  for (const label of goalsFailed) console.error(`  ${label}`);
}
process.exitCode = failed || goalsFailed.length > 0 ? 1 : 0;

function formatGoal(goal) {
  if (goal.skipped) return `  goal: ${goal.label}: SKIPPED (${goal.skipped}); goal ${goal.target}`;
  const digits = goal.unit === 'ms' && Math.abs(goal.value) < 10 ? 3 : goal.unit === 'ms' ? 0 : 2;
  const value = goal.unit === 'ms' ? `${goal.value.toFixed(digits)} ms` : goal.value.toFixed(2);
  const detail = goal.detail ? ` (${goal.detail})` : '';
  // A goal without `fail` is judged strictly: any miss fails.
  const verdict = goal.pass ? 'PASS' : goal.fail === false ? `MISS (within ${goal.limit})` : 'FAIL';
  const limit = goal.limit && goal.pass ? `, fails beyond ${goal.limit.replace(/^[≤≥] /, '')}` : '';
  return `  goal: ${goal.label}: ${value}; goal ${goal.target}${limit}: ${verdict}${detail}`;
}

/** A plain-text table; numbers right-aligned, missing values shown as n/a. */
function formatTable(rows, columns) {
  const cols =
    columns ??
    [...new Set(rows.flatMap((r) => Object.keys(r)))].map((key) => ({ key, label: key, format: undefined }));
  const cell = (col, row) => {
    const v = row[col.key];
    if (v === null || v === undefined || (typeof v === 'number' && Number.isNaN(v))) return 'n/a';
    if (col.format) return col.format(v);
    return typeof v === 'object' ? JSON.stringify(v) : String(v);
  };
  const body = rows.map((row) => cols.map((col) => cell(col, row)));
  const widths = cols.map((col, i) => Math.max(col.label.length, ...body.map((r) => r[i].length)));
  const line = (cells, alignRight) =>
    `  | ${cells.map((c, i) => (alignRight[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' | ')} |`;
  const numeric = cols.map((col) => rows.some((r) => typeof r[col.key] === 'number'));
  const out = [
    line(
      cols.map((c) => c.label),
      numeric,
    ),
    `  |${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`,
  ];
  for (const r of body) out.push(line(r, numeric));
  return out.join('\n');
}
