/**
 * The router bench's cutover part, as figures: the load's records of each run split into phases
 * (before, during the engine's window, while the command ran, traffic moving, after), pooled
 * across runs, and the p99 the "before" gives at each phase's sample size.
 */
import { seededRandom } from './generate-topology.js';
import { summarize } from './load.js';

/** Around the time traffic moves, so that an instant switch (a rollback) has requests to measure. */
export const movingMarginMs = 100;
/** How long the "after" phase is measured. */
export const settleMs = 2_000;

export function pick(summary, seconds) {
  return {
    reqPerSec: seconds > 0 ? summary.requests / seconds : Number.NaN,
    requests: summary.requests,
    failed: summary.failed,
    p50: summary.p50,
    p99: summary.p99,
    lateP99: summary.lateP99,
  };
}

/** The records of one run in a phase, and how long the phase lasted (ms). */
function phaseOf(run, which) {
  const { records } = run.summary;
  const firstNew = Math.min(...records.filter((r) => r.version === run.newVersion).map((r) => r.sentAt));
  const lastOld = Math.max(...records.filter((r) => r.version === run.oldVersion).map((r) => r.sentAt));
  const [from, to] = {
    before: [0, run.from],
    during: [run.cutoverFrom, run.cutoverTo],
    command: [run.from, run.to],
    // Stepped shifts overlap (both versions answer for a while); a rollback switches at once.
    moving: [Math.min(firstNew, lastOld) - movingMarginMs, Math.max(firstNew, lastOld) + movingMarginMs],
    after: [run.to, Number.POSITIVE_INFINITY],
  }[which];
  const inPhase = records.filter((r) => r.sentAt >= from && r.sentAt < to);
  return { records: inPhase, ms: Number.isFinite(to) ? to - from : settleMs };
}

export function pooled(runs, which) {
  const phases = runs.map((run) => phaseOf(run, which));
  const seconds = phases.reduce((t, p) => t + p.ms, 0) / 1000;
  return {
    ...summarize(
      phases.flatMap((p) => p.records),
      seconds || 1,
    ),
    seconds,
  };
}

export const baselineDraws = 201;

/**
 * The p99 the "before" of these runs gives at the sample size of `which`: for each run, as many
 * consecutive requests as it has in `which`, from a random place in its "before"; pooled across
 * runs; the median over `baselineDraws` draws (a fixed seed: the same records give the same
 * figure). Consecutive, not scattered: slow requests come in clusters (a busy core), and a window
 * of the same length meets them as often as the cutover's window would.
 */
export function baselineP99(runs, which) {
  const random = seededRandom(0x5eed);
  const picks = runs.map((run) => ({
    before: phaseOf(run, 'before').records.sort((a, b) => a.sentAt - b.sentAt),
    size: phaseOf(run, which).records.length,
  }));
  const draws = [];
  for (let draw = 0; draw < baselineDraws; draw++) {
    const sample = picks.flatMap(({ before, size }) => {
      const start = Math.floor(random() * Math.max(1, before.length - size + 1));
      return before.slice(start, start + size);
    });
    draws.push(summarize(sample, 1).p99);
  }
  return draws.sort((a, b) => a - b)[Math.floor(draws.length / 2)];
}

export function phaseRows(label, runs) {
  return ['before', 'during', 'command', 'moving', 'after'].map((which) => {
    const s = pooled(runs, which);
    const each = `${(s.seconds / runs.length).toFixed(2)} s each`;
    const name = {
      before: 'before',
      during: `during the cutover (${each})`,
      command: `while the command ran (${each})`,
      moving: `traffic moving ± ${movingMarginMs} ms (${each})`,
      after: 'after',
    }[which];
    return { measurement: `${label}: ${name}`, ...pick(s, s.seconds) };
  });
}
