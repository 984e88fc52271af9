/**
 * Watch bench: commit-to-plan latency of `cutover watch`, with the Watcher class of dist/ in this
 * process (its `onReport` callback marks the moment a report is written), on real Git repositories
 * in a temporary directory (a copy of examples/exec-demo):
 *
 * - local: the repository's refs are watched; each commit changes the topology (db's version) and
 *   the next is made only once the previous one is planned. Latency: `git commit` returned → the
 *   report of that commit written.
 * - remote: a bare repository on disk (`file://`), fetched every second (±10 % jitter); each push
 *   waits for the previous one's report and a random pause (so that it lands at a random point of
 *   the interval). Latency: `git push` returned → report written; expect about half an interval on
 *   average, at most an interval (+10 % jitter) and the fetch.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { judgeGoal, median, strictGoal, withTempDir } from './support.js';

export const name = 'watch';
export const title =
  'Watch: commit (or push) → plan report written, real Git repositories (in-process Watcher)';
export const columns = [
  { key: 'mode', label: 'mode' },
  { key: 'commits', label: 'commits' },
  { key: 'p50', label: 'p50 ms', format: (v) => v.toFixed(0) },
  { key: 'p99', label: 'p99 ms', format: (v) => v.toFixed(0) },
  { key: 'min', label: 'min ms', format: (v) => v.toFixed(0) },
  { key: 'max', label: 'max ms', format: (v) => v.toFixed(0) },
  { key: 'missed', label: 'not planned' },
];

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const localGoalMs = 1000;
const intervalMs = 1000;
const remoteGoalMs = intervalMs + 1000;
const reportTimeoutMs = 10_000;

const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: 'Cutover Bench',
  GIT_AUTHOR_EMAIL: 'bench@cutover.invalid',
  GIT_COMMITTER_NAME: 'Cutover Bench',
  GIT_COMMITTER_EMAIL: 'bench@cutover.invalid',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
};

function git(cwd, ...args) {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, env: gitEnv }, (error, stdout, stderr) => {
      if (error) reject(new Error(`git ${args.join(' ')}: ${stderr.trim() || error.message}`));
      else resolve(stdout.trim());
    });
  });
}

/** Nearest rank: the smallest value with at least p % of the values at or below it. */
function percentile(values, p) {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function makeRepo(dir) {
  const repo = path.join(dir, 'repo');
  cpSync(path.join(repoRoot, 'examples', 'exec-demo'), repo, { recursive: true });
  await git(dir, 'init', '-q', '-b', 'main', repo);
  await git(repo, 'add', '-A');
  await git(repo, 'commit', '-q', '-m', 'initial topology');
  return repo;
}

function setDbVersion(repo, version) {
  const file = path.join(repo, 'topology.yaml');
  const text = readFileSync(file, 'utf8');
  const next = text.replace(/(\n {2}db:\n(?: {4}.*\n)*? {4}version: )"[^"]*"/, `$1"${version}"`);
  if (next === text) throw new Error('no db version in topology.yaml');
  writeFileSync(file, next);
}

/** Watcher reports by commit; `waitFor(sha)` resolves when that commit's report is written. */
function reportWaiter() {
  const seen = new Map();
  const waiting = new Map();
  return {
    onReport(report) {
      if (report.kind !== 'plan') return;
      const at = performance.now();
      if (!seen.has(report.commit)) seen.set(report.commit, at);
      waiting.get(report.commit)?.(at);
    },
    waitFor(sha) {
      if (seen.has(sha)) return Promise.resolve(seen.get(sha));
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(null), reportTimeoutMs);
        waiting.set(sha, (at) => {
          clearTimeout(timer);
          waiting.delete(sha);
          resolve(at);
        });
      });
    },
  };
}

async function measure({ Watcher, dir, count, remote, log }) {
  const repo = await makeRepo(dir);
  let source = repo;
  if (remote) {
    const bare = path.join(dir, 'remote.git');
    await git(dir, 'init', '-q', '--bare', '-b', 'main', bare);
    await git(repo, 'remote', 'add', 'origin', bare);
    await git(repo, 'push', '-q', 'origin', 'main');
    source = `file://${bare}`;
  }
  const reports = reportWaiter();
  const problems = [];
  const watcher = new Watcher({
    repo: source,
    branch: 'main',
    files: ['topology.yaml'],
    // Local: the safety poll, kept out of the way so that every figure is the refs watch's.
    intervalMs: remote ? intervalMs : 60_000,
    apply: false,
    outDir: path.join(dir, 'out'),
    stateDir: path.join(dir, 'state'),
    log: (line) => {
      if (/failed/.test(line)) problems.push(line);
    },
    onReport: reports.onReport,
  });
  await watcher.start();
  const latencies = [];
  let missed = 0;
  try {
    for (let i = 1; i <= count; i++) {
      // A push right after a report would land just after a fetch, a whole interval before the
      // next: pushes come at a random point of the interval instead, as they do in life.
      if (remote) await sleep(Math.random() * intervalMs);
      setDbVersion(repo, `bench-${i}`);
      await git(repo, 'add', 'topology.yaml');
      await git(repo, 'commit', '-q', '-m', `db bench-${i}`);
      if (remote) await git(repo, 'push', '-q', 'origin', 'main');
      const done = performance.now();
      const sha = await git(repo, 'rev-parse', 'HEAD');
      const at = await reports.waitFor(sha);
      if (at === null) missed++;
      else latencies.push(at - done);
      if (i % 10 === 0) log(`${remote ? 'remote' : 'local'}: ${i}/${count} commits planned`);
    }
  } finally {
    await watcher.stop();
  }
  return {
    mode: remote
      ? `remote (file:// bare repository, fetch every ${intervalMs / 1000} s)`
      : 'local (refs watched)',
    commits: count,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    min: Math.min(...latencies),
    max: Math.max(...latencies),
    mean: latencies.reduce((a, b) => a + b, 0) / latencies.length,
    median: median(latencies),
    missed,
    problems,
    latencies: latencies.map((v) => Number(v.toFixed(1))),
  };
}

export async function run({ quick, log }) {
  const watcherJs = path.join(repoRoot, 'dist', 'watch', 'watcher.js');
  if (!existsSync(watcherJs)) throw new Error('dist/watch/watcher.js is missing: run `npm run build` first');
  const { Watcher } = await import(watcherJs);
  const localCount = quick ? 20 : 50;
  const remoteCount = quick ? 5 : 10;
  log(`local: ${localCount} commits, each planned before the next`);
  const local = await withTempDir('watch-local', (dir) =>
    measure({ Watcher, dir, count: localCount, remote: false, log }),
  );
  log(`remote: ${remoteCount} pushes to a bare repository, fetched every ${intervalMs / 1000} s`);
  const remote = await withTempDir('watch-remote', (dir) =>
    measure({ Watcher, dir, count: remoteCount, remote: true, log }),
  );
  const rows = [local, remote];
  const notes = [
    'p99 is the nearest rank: with 50 commits or 10 pushes, the slowest of them.',
    'Remote pushes are made at a random point of the fetch interval (a random pause before each).',
    'Latency includes the watcher debounce (60 ms), the git reads (rev-parse, ls-tree, cat-file), planning against the layout and writing both report files.',
  ];
  for (const row of rows) {
    for (const problem of row.problems) notes.push(`${row.mode}: ${problem}`);
  }
  const goals = [
    judgeGoal({
      label: `local: commit → report, p99 of ${local.commits} commits (p50 ${local.p50.toFixed(0)} ms)`,
      value: local.p99,
      unit: 'ms',
      target: localGoalMs,
      exclusive: true,
      failBeyond: 2 * localGoalMs,
      wallClock: true,
    }),
    judgeGoal({
      label: `remote: push → report, p99 of ${remote.commits} pushes, ${intervalMs / 1000} s interval (p50 ${remote.p50.toFixed(0)} ms; goal: interval + 1 s)`,
      value: remote.p99,
      unit: 'ms',
      target: remoteGoalMs,
      exclusive: true,
      failBeyond: 2 * remoteGoalMs,
      wallClock: true,
    }),
    strictGoal({
      label: 'commits and pushes never planned',
      value: local.missed + remote.missed,
      target: '= 0',
      pass: local.missed + remote.missed === 0,
    }),
  ];
  return { rows, goals, notes };
}
