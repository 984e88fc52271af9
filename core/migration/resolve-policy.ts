import type { MigrationState, SkippedStep } from './types.js';
import { isFinal } from './types.js';

/**
 * When undo steps left for a person can be resolved (by either `--retry` or `--skip`): once the migration has ended (a rollback
 * still running may yet do them itself), and only steps not resolved yet. `step` names one by its
 * command id; without it, every step left is meant.
 */
export function refuseResolve(state: MigrationState, step?: string): string | null {
  const id = state.spec.id;
  if (!isFinal(state.lifecycle))
    return `cannot resolve ${id}: it has not ended (${state.lifecycle.replace('_', ' ')})`;
  const left = stepsLeft(state);
  if (left.length === 0) return `cannot resolve ${id}: no undo step of ${id} is left for a person`;
  if (step !== undefined && !left.some((s) => s.command.id === step)) {
    const names = left.map((s) => `${s.command.id} (${s.what})`).join(', ');
    return `cannot resolve ${id}: no undo step ${step} of ${id} is left for a person; left: ${names}`;
  }
  return null;
}

/** The undo steps still waiting for a person. */
export function stepsLeft(state: MigrationState): SkippedStep[] {
  return (state.ending?.skipped ?? []).filter((s) => s.resolved === undefined);
}

/** The steps a resolve acts on: the one named, or every one left. */
export function stepsToResolve(state: MigrationState, step?: string): SkippedStep[] {
  return stepsLeft(state).filter((s) => step === undefined || s.command.id === step);
}
