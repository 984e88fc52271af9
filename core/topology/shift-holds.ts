/**
 * Shift steps that dwell: `shift: [{ weight: 10, hold: 2m, analysis: {…} }, 50, 100]`. The file's
 * steps are numbers or objects; the model keeps the weights in `Route.shift` (as before) and the
 * holds beside them in `Route.holds`, present only when a step holds, so routes without holds
 * normalise, digest and plan exactly as they did.
 */
import { type AnalysisSettings, parseAnalysisSettings } from '../analysis/analysis-settings.js';
import type { PathProblem } from './diagnostic.js';
import { formatDuration, parseDuration } from './duration.js';
import { type ShiftStepFile, stepWeight } from './file-types.js';
import type { Route, StepHold } from './types.js';

/** What check-topology asks of the steps beyond the schema: increasing, ending at 100, holds that mean something. */
export function checkShiftSteps(
  shift: readonly (number | ShiftStepFile)[],
  at: readonly (string | number)[],
  problems: PathProblem[],
): void {
  for (let i = 1; i < shift.length; i++) {
    if (stepWeight(shift[i] as number) <= stepWeight(shift[i - 1] as number)) {
      problems.push({ path: [...at, i], message: 'steps must increase' });
    }
  }
  if (stepWeight(shift[shift.length - 1] as number) !== 100) {
    problems.push({ path: [...at, shift.length - 1], message: 'the last step must be 100' });
  }
  shift.forEach((step, i) => {
    if (typeof step === 'number') return;
    const hold = step.hold === undefined || step.hold === 'manual' ? step.hold : parseDuration(step.hold);
    if (hold === 0) problems.push({ path: [...at, i, 'hold'], message: 'must be longer than 0s' });
    if (step.analysis === undefined) return;
    if (typeof hold !== 'number' || hold <= 0) {
      problems.push({
        path: [...at, i, 'analysis'],
        message: `needs a hold of a duration (e.g. hold: 2m): the analysis measures the traffic of that window${step.hold === 'manual' ? ', and a manual hold has none' : ''}`,
      });
      return;
    }
    const parsed = parseAnalysisSettings(step.analysis, [...at, i, 'analysis']);
    problems.push(...parsed.problems);
  });
}

/**
 * Routes a migration moves shift together (one `cutover:shift`) and dwell as one step at each
 * weight: manual when any route holds manual there (shiftDwells). A manual hold issues no command,
 * so an analysis another route asks at that weight would never run while the plan printed it.
 * Any two routes can be moved by the same migration, so the file refuses the mix, at the analysis.
 */
export function checkSharedDwells(
  routes: readonly (readonly [string, readonly (number | ShiftStepFile)[] | undefined])[],
  problems: PathProblem[],
): void {
  // It runs on files the schema refused too: a malformed step is the schema's to report.
  const stepsOf = (shift: unknown) =>
    (Array.isArray(shift) ? shift : []).map((step: unknown) =>
      typeof step === 'object' && step !== null ? (step as ShiftStepFile) : null,
    );
  const manualAt = new Map<number, string>(); // weight → the first route holding manual there
  for (const [name, shift] of routes)
    for (const step of stepsOf(shift))
      if (step?.hold === 'manual' && !manualAt.has(step.weight)) manualAt.set(step.weight, name);
  for (const [name, shift] of routes) {
    stepsOf(shift).forEach((step, i) => {
      if (!step || step.analysis === undefined || step.hold === 'manual') return;
      const manual = manualAt.get(step.weight);
      if (manual === undefined || manual === name) return;
      problems.push({
        path: ['routes', name, 'shift', i, 'analysis'],
        message: `route ${manual} holds manual at ${step.weight} %, and routes shifted together dwell as one step there: a manual hold runs no analysis, so this one would never run; drop the manual hold of route ${manual} at ${step.weight} % (its step then holds this timed, analysed window), or analyse at a weight no route holds manually`,
      });
    });
  }
}

/** The model's weights and holds of a valid file's steps. */
export function normalizeShift(
  shift: readonly (number | ShiftStepFile)[],
): Pick<Route, 'shift'> & { holds?: StepHold[] } {
  const holds: StepHold[] = [];
  for (const step of shift) {
    if (typeof step === 'number' || step.hold === undefined) continue;
    const hold: StepHold = {
      weight: step.weight,
      hold: step.hold === 'manual' ? 'manual' : (parseDuration(step.hold) ?? 0),
    };
    if (step.analysis !== undefined) {
      const { settings } = parseAnalysisSettings(step.analysis);
      if (settings) hold.analysis = settings;
    }
    holds.push(hold);
  }
  const weights = shift.map(stepWeight);
  return holds.length > 0 ? { shift: weights, holds } : { shift: weights };
}

/** The steps as a file writes them (a recorded layout): numbers, and objects for the steps that hold. */
export function shiftFileOf(route: Pick<Route, 'shift' | 'holds'>): (number | ShiftStepFile)[] {
  if (!route.holds) return route.shift;
  return route.shift.map((weight) => {
    const hold = route.holds?.find((h) => h.weight === weight);
    if (!hold) return weight;
    const step: ShiftStepFile = {
      weight,
      hold: hold.hold === 'manual' ? 'manual' : formatDuration(hold.hold),
    };
    if (hold.analysis) step.analysis = writtenAnalysis(hold.analysis);
    return step;
  });
}

/** The analysis settings as a file writes them (parseAnalysisSettings reads them back the same). */
export function writtenAnalysis(settings: AnalysisSettings): Record<string, unknown> {
  const { checks, prometheus } = settings;
  const out: Record<string, unknown> = { minRequests: checks.minRequests };
  if (checks.successRate) out.successRate = { ...checks.successRate };
  if (checks.latency?.p99) out.latency = { p99: { max: formatDuration(checks.latency.p99.maxMs) } };
  if (checks.compareWithBlue) out.compareWithBlue = structuredClone(checks.compareWithBlue);
  if (prometheus.length > 0) out.prometheus = prometheus.map((check) => ({ ...check }));
  return out;
}
