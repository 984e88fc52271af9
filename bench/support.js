/**
 * Shared helpers for the benchmarks: statistics, temporary directories and child processes that are
 * always cleaned up, even when the run is interrupted (run.js calls `cleanUpEverything` on SIGINT).
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

const liveChildren = new Set();
const liveTempDirs = new Set();
const cleanUpHooks = new Set();

export function median(values) {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Runs `fn(dir)` with a fresh temporary directory, removed afterwards whatever happens. */
export async function withTempDir(prefix, fn) {
  const dir = await mkdtemp(join(tmpdir(), `cutover-bench-${prefix}-`));
  liveTempDirs.add(dir);
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
    liveTempDirs.delete(dir);
  }
}

/**
 * Runs `node ...args` and resolves with { code, signal, stdout, stderr, wallMs } once it exits.
 * The child is killed when it runs past `timeoutMs`, and by `cleanUpEverything`.
 */
export function runNode(args, { cwd, env, timeoutMs = 10 * 60_000 } = {}) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, {
      cwd,
      env: env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    liveChildren.add(child);
    const stdout = [];
    const stderr = [];
    child.stdout.on('data', (chunk) => stdout.push(chunk));
    child.stderr.on('data', (chunk) => stderr.push(chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      liveChildren.delete(child);
      reject(error);
    });
    child.on('close', (code, signal) => {
      const wallMs = performance.now() - started;
      clearTimeout(timer);
      liveChildren.delete(child);
      resolve({
        code,
        signal,
        wallMs,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: Buffer.concat(stderr).toString('utf8'),
      });
    });
  });
}

/**
 * Runs `hook` (synchronous) when everything is cleaned up on an interrupt: after this bench's own
 * children are killed (a CLI in the middle of a migration starts nothing more), before the temp
 * dirs are removed, so that what those children started (a router, a component's processes, which
 * outlive them) is stopped while its records and working directories are still there. Returns the
 * function that unregisters it.
 */
export function atCleanUp(hook) {
  cleanUpHooks.add(hook);
  return () => cleanUpHooks.delete(hook);
}

/** Synchronous on purpose: it runs from signal handlers, just before the process exits. */
export function cleanUpEverything() {
  for (const child of liveChildren) child.kill('SIGKILL');
  liveChildren.clear();
  for (const hook of cleanUpHooks) {
    try {
      hook();
    } catch (error) {
      console.error(`clean-up: ${error?.message ?? error}`);
    }
  }
  cleanUpHooks.clear();
  for (const dir of liveTempDirs) rmSync(dir, { recursive: true, force: true });
  liveTempDirs.clear();
}

/** Drivers whose calls succeed at once: what a bench measures is cutover (or Temporal), not a driver. */
export function noopDrivers() {
  const component = {
    provision: async (ctx, slot) => ({
      component: ctx.component,
      slot,
      version: ctx.spec.version,
      addresses: ['127.0.0.1:9'],
    }),
    replicate: async () => {},
    drain: async () => {},
    retire: async () => {},
  };
  // Nothing is carried, so nothing is in flight.
  const route = {
    apply: async () => {},
    remove: async () => {},
    drain: async () => ({ drained: true, inFlight: 0 }),
  };
  return { component: { process: component, exec: component }, route: { router: route } };
}

/** A TCP port free on loopback now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * A goal judged twice: `pass` when the value meets the target, `fail` when it misses by a wide
 * margin (beyond `failBeyond`). A shared 2-core machine moves every figure by tens of percent, so
 * only a wide miss (a regression: a quadratic walk, a proxy twice as slow) fails the run; a narrow
 * one is reported as MISS. `atMost`: the value must not exceed the target; otherwise at least.
 * A value that could not be measured (NaN) fails.
 *
 * `wallClock`: an absolute time that other work on the machine stretches (a ratio of two figures
 * taken side by side does not need it). Its wide margin grows with the load: with the 1-minute
 * load average above the number of cores, each process gets that much less of a core, so the
 * margin is multiplied by load / cores (a 10,000-component plan took 5 s at load 20 on 2 cores,
 * 0.8 s at load 1). The target itself does not move: PASS still means the goal was met.
 */
export function judgeGoal({
  label,
  value,
  unit,
  target,
  failBeyond: wideBound,
  atMost = true,
  exclusive = false,
  wallClock = false,
  loadPerCore,
  ...rest
}) {
  // The load when the figure was measured (`loadPerCore`, when the bench sampled it), not when it is
  // judged: a bench that measures for minutes sees the load change.
  const busy = wallClock ? Math.max(1, loadPerCore ?? loadFactor()) : 1;
  const failBeyond = busy > 1 ? Number((wideBound * busy).toFixed(2)) : wideBound;
  const meets = (bound) =>
    atMost ? (exclusive ? value < bound : value <= bound) : exclusive ? value > bound : value >= bound;
  const show = (v) => (unit === 'ms' ? `${v} ms` : String(v));
  return {
    label,
    value,
    ...(unit === undefined ? {} : { unit }),
    target: `${atMost ? (exclusive ? '<' : '≤') : exclusive ? '>' : '≥'} ${show(target)}`,
    limit: `${atMost ? '≤' : '≥'} ${show(failBeyond)}${busy > 1 ? ` (${show(wideBound)} × load ${busy.toFixed(1)} per core)` : ''}`,
    pass: meets(target),
    fail: !(atMost ? value <= failBeyond : value >= failBeyond),
    ...rest,
  };
}

/** A goal that is met or not, with no margin: failed requests, a missed commit. */
export function strictGoal({ label, value, unit, target, pass, ...rest }) {
  return { label, value, ...(unit === undefined ? {} : { unit }), target, pass, fail: !pass, ...rest };
}

/** A figure recorded for the reader, with no goal to meet (it never fails the run). */
export function recordedGoal({ label, value, unit, target = '(recorded; no goal)', ...rest }) {
  return { label, value, ...(unit === undefined ? {} : { unit }), target, pass: true, fail: false, ...rest };
}

/** The 1-minute load average per core, at least 1: how much a busy machine stretches wall time. */
export function loadFactor() {
  return Math.max(1, loadavg()[0] / Math.max(1, cpus().length));
}
