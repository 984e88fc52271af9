/**
 * A migration's plan as a graph of waves (core/plan/plan-edges.ts, the same waves `plan` prints):
 * a wave runs at once, each wave after the one before; every action marked with what became of it
 * (done, running, waiting, failed, undone, stopped).
 */
import { planWaves } from '../../core/plan/plan-edges.js';
import type { Action, ActionOutcome, MigrationDetail } from '../types.js';

const outcomeText: Record<ActionOutcome, string> = {
  done: 'done',
  running: 'running',
  not_run: 'waiting',
  failed: 'failed',
  undone: 'undone',
  stopped: 'stopped',
};

function subject(action: Action): string {
  return action.component ?? action.route ?? (action.routes ?? []).join(', ');
}

function label(action: Action): string {
  switch (action.type) {
    case 'check_health':
      return `health gate ${subject(action)}`;
    case 'shift_traffic':
      return `shift ${subject(action)}`;
    case 'retire_blue':
      return `retire blue ${subject(action)}`;
    default:
      return `${action.type.replaceAll('_', ' ')} ${subject(action)}`;
  }
}

export function Stages({ detail, weight }: { detail: MigrationDetail; weight: number | null }) {
  const outcomes = new Map(detail.actions.map((a) => [a.id, a.outcome]));
  const waves = planWaves(detail.state.spec.plan.actions);
  return (
    <section aria-labelledby="stages-title" class="card">
      <h2 id="stages-title">Stages</h2>
      <p class="hint">Each column is a wave: its actions run at once, after the wave before.</p>
      <ol class="waves">
        {waves.map((wave, i) => (
          <li key={i} class="wave">
            <h3>Wave {i + 1}</h3>
            <ul>
              {wave.map((action) => {
                const outcome = outcomes.get(action.id) ?? 'not_run';
                return (
                  <li
                    key={action.id}
                    class={`action ${outcome}`}
                    data-action={action.id}
                    data-outcome={outcome}
                  >
                    <span class="stage">{action.stage.replaceAll('_', ' ')}</span>
                    <span class="what">{label(action)}</span>
                    <span class="outcome">
                      {outcomeText[outcome]}
                      {action.type === 'shift_traffic' && outcome === 'running' && weight !== null
                        ? ` · ${weight} % green`
                        : ''}
                    </span>
                  </li>
                );
              })}
            </ul>
          </li>
        ))}
      </ol>
    </section>
  );
}
