/**
 * What a migration waits for now: a person (a manual hold: promote to the next step, or commit),
 * or a clock (a timed hold or an analysis window, counted down from the step that began it).
 */
import { useEffect, useState } from 'preact/hooks';
import { duration } from '../format.js';
import type { Command, LogLineJson, MigrationDetail } from '../types.js';
import type { WeightPoint } from './weights.js';

/** The timed wait in flight (a hold's dwell or an analysis window), if any. */
function timedHold(detail: MigrationDetail): { ms: number; kind: 'hold' | 'analysis' } | null {
  for (const c of detail.state.inflight as Command[]) {
    if (c.kind === 'wait' && c.purpose === 'hold') return { ms: c.ms, kind: 'hold' };
    if (c.kind === 'analyze') return { ms: c.ms, kind: 'analysis' };
  }
  return null;
}

/** The weight after `current` on the routes of the shift waiting: the next step of their `shift`. */
function nextStep(detail: MigrationDetail, current: number | null): number | null {
  const { actions } = detail.state.spec.plan;
  const run = detail.state.running.find((r) => actions[r.index]?.type === 'shift_traffic');
  const action = run ? actions[run.index] : undefined;
  const route = action?.route ?? action?.routes?.[0];
  const shift = route ? detail.state.spec.desired.routes[route]?.shift : undefined;
  if (!shift) return null;
  return shift.find((w) => w > (current ?? 0)) ?? null;
}

function useNow(active: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(() => setNow(Date.now()), 250);
    return () => clearInterval(timer);
  }, [active]);
  return now;
}

export function HoldPanel({
  detail,
  lines,
  weight,
}: {
  detail: MigrationDetail;
  lines: readonly LogLineJson[];
  weight: WeightPoint | null;
}) {
  const { lifecycle } = detail.summary;
  const timed = lifecycle === 'running' ? timedHold(detail) : null;
  const now = useNow(timed !== null);
  if (lifecycle === 'awaiting_promotion') {
    const next = nextStep(detail, weight?.percent ?? null);
    return (
      <p class="hold manual" data-hold="manual">
        {/* The weight comes from the log, a moment after the state: without it, no number. */}
        <strong>Waiting for an operator</strong>
        {weight === null ? '' : ` at ${weight.percent} % green`}: promote to go on to the next step
        {next === null ? '' : ` (${next} %)`}, or promote fully to 100 %; roll back to put all traffic back on
        blue.
      </p>
    );
  }
  if (lifecycle === 'awaiting_commit') {
    return (
      <p class="hold manual" data-hold="commit">
        <strong>Waiting for an operator to commit:</strong> every stage has passed; the commit retires blue
        and cannot be undone by a rollback.
      </p>
    );
  }
  if (timed === null) return null;
  // The hold began when its step's weight was set (the last traffic step of the log).
  const began = weight?.at ?? Date.parse(lines.at(-1)?.at ?? detail.summary.updatedAt);
  const left = began + timed.ms - now;
  return (
    <p class="hold timed" data-hold="timed">
      <strong>{timed.kind === 'analysis' ? 'Measuring green' : 'Holding'}</strong> at {weight?.percent ?? '?'}{' '}
      % green: <span data-field="countdown">{left > 0 ? `about ${duration(left)} left` : 'ending now'}</span>{' '}
      of {duration(timed.ms)}.
    </p>
  );
}
