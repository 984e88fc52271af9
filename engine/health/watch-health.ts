/**
 * Green's health after its gate passed: watched for as long as a hold (or the bake) lasts, and
 * checked before each weight change and before the drain. The gate (check-health.ts) looks once,
 * before traffic moves; a green that dies afterwards must not be promoted, so the commands that move
 * a migration on look again, and a hold looks all along.
 *
 * The rule is the component's own health settings: every `interval`, every replica (or the slot's
 * command) is probed, each probe bounded by `timeout`; `failureThreshold` failures in a row of any
 * target is green lost (GreenUnhealthyError), and the migration rolls back at once. Unlike the gate,
 * a refused connection counts from the first probe: green was up, so nothing is starting.
 */
import http from 'node:http';
import { formatDuration } from '../../core/topology/duration.js';
import type { Health } from '../../core/topology/types.js';
import { buildProbes, probeLabel, sleepUnlessAborted } from './check-health.js';

/** Green lost its health after the gate: not retryable; the migration rolls back (`rolled_back`). */
export class GreenUnhealthyError extends Error {
  override readonly name = 'GreenUnhealthyError';
  readonly retryable = false;
}

/** One green slot to watch, with what its probes need. */
export interface WatchedSlot {
  component: string;
  health: Health;
  addresses: string[];
  env?: Record<string, string>;
  cwd: string;
  /**
   * Why the probes' answers are not the slot's own (its replicas are gone though their addresses
   * answer), or undefined: asked in `check` mode once every probe passed.
   */
  gone?: () => Promise<string | undefined>;
}

/**
 * `watch`: probes until `signal` aborts, then resolves. `check`: resolves once the last probe of
 * every target succeeded (one round when green is well). Both reject with GreenUnhealthyError as
 * soon as a target has `failureThreshold` failures in a row. `during` ends the reason: "during the
 * 50 % hold", "before the drain".
 */
export async function watchGreen(
  slots: readonly WatchedSlot[],
  mode: 'watch' | 'check',
  during: string,
  signal: AbortSignal,
  log: (line: string) => void,
): Promise<void> {
  if (slots.length === 0) return;
  // One slot lost stops the others' probing at once.
  const stop = new AbortController();
  const both = AbortSignal.any([signal, stop.signal]);
  let lost: unknown;
  await Promise.all(
    slots.map((slot) =>
      watchSlot(slot, mode, during, both, log).catch((error: unknown) => {
        lost ??= error;
        stop.abort(error);
      }),
    ),
  );
  if (lost !== undefined) throw lost;
}

/**
 * Runs `work` while every slot is watched; green lost aborts it, and the loss is what rejects. The
 * watching ends with the work.
 */
export async function whileGreenHealthy<T>(
  slots: readonly WatchedSlot[],
  during: string,
  signal: AbortSignal,
  log: (line: string) => void,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  if (slots.length === 0) return work(signal);
  log(`health: watching ${describeSlots(slots)} ${during}`);
  const stop = new AbortController();
  const both = AbortSignal.any([signal, stop.signal]);
  let lost: unknown;
  const watching = watchGreen(slots, 'watch', during, both, log).catch((error: unknown) => {
    lost = error;
    stop.abort(error);
  });
  try {
    return await work(both);
  } catch (error) {
    if (lost !== undefined && !signal.aborted) throw lost;
    throw error;
  } finally {
    stop.abort();
    await watching;
  }
}

async function watchSlot(
  slot: WatchedSlot,
  mode: 'watch' | 'check',
  during: string,
  signal: AbortSignal,
  log: (line: string) => void,
): Promise<void> {
  const { health } = slot;
  const agent = new http.Agent({ keepAlive: false });
  try {
    const probes = buildProbes(health, slot, agent);
    const failures = probes.map(() => 0);
    const last = probes.map(() => '');
    for (;;) {
      const startedAt = performance.now();
      await Promise.all(
        probes.map(async (probe, i) => {
          const result = await probe.run(health.timeout, signal);
          if (!result) return;
          if (result.ok) {
            if ((failures[i] ?? 0) > 0) log(`health: green ${slot.component} ${probe.target} answers again`);
            failures[i] = 0;
            return;
          }
          failures[i] = (failures[i] ?? 0) + 1;
          if (last[i] !== result.summary)
            log(`health: green ${slot.component} ${probeLabel(probe)} → ${result.summary}`);
          last[i] = result.summary;
        }),
      );
      if (signal.aborted) return;
      const failed = failures.findIndex((n) => n >= health.failureThreshold);
      if (failed >= 0) {
        const probe = probes[failed];
        throw new GreenUnhealthyError(
          `green ${slot.component} lost its health ${during}: ${probe ? probeLabel(probe) : ''} → ${last[failed]} (${failures[failed]} failures in a row, every ${formatDuration(health.interval)})`,
        );
      }
      if (mode === 'check' && failures.every((n) => n === 0)) {
        const gone = await slot.gone?.();
        if (gone !== undefined)
          throw new GreenUnhealthyError(`green ${slot.component} lost its health ${during}: ${gone}`);
        return;
      }
      await sleepUnlessAborted(health.interval - (performance.now() - startedAt), signal);
      if (signal.aborted) return;
    }
  } finally {
    agent.destroy();
  }
}

function describeSlots(slots: readonly WatchedSlot[]): string {
  const names = slots.map((s) => s.component).join(', ');
  const first = slots[0] as WatchedSlot;
  const every = slots.every((s) => s.health.interval === first.health.interval)
    ? ` every ${formatDuration(first.health.interval)}`
    : '';
  return `green ${names}${every}`;
}
