/**
 * A recording component driver set for tests that exercise the runner and its journal, not a
 * driver: every call is recorded (start and end, in order), slots keep markers as the slow-exec
 * fixture's scripts do (provisioned, replicated-from-…, drained, retired), and a test can make one
 * call fail, or hang until the runner is stopped (a crash inside that call). The record outlives
 * the runners that use it, as the infrastructure outlives a crashed cutover.
 */
import type { Slot, SlotInfo } from '../../core/layout.js';
import type { DriverSet } from '../../engine/drivers/driver-set.js';
import {
  type ComponentCallContext,
  type ComponentDriver,
  type DriverCallOptions,
  PermanentDriverError,
} from '../../engine/drivers/types.js';

export type RecordedStage = 'provision' | 'replicate' | 'drain' | 'retire';

export interface RecordedCall {
  phase: 'start' | 'end';
  stage: RecordedStage;
  component: string;
  slot: Slot;
  slotId: string;
  /** Which runner made it: the generation given to `driverSet`. */
  runner: number;
}

/** `stage:component:slot`, as the crash tests name a call (`provision:b:green`). */
export type CallName = `${RecordedStage}:${string}:${Slot}`;

export function callName(call: Pick<RecordedCall, 'stage' | 'component' | 'slot'>): CallName {
  return `${call.stage}:${call.component}:${call.slot}`;
}

export class RecordingDrivers {
  readonly calls: RecordedCall[] = [];
  /** Markers of every slot id ever touched. */
  readonly markers = new Map<string, Set<string>>();
  /** The next call of these names never returns: it waits for the runner's abort (a crash). */
  readonly hang = new Set<CallName>();
  /** The next call of these names fails permanently (the script said so). */
  readonly fail = new Set<CallName>();
  /** The calls hanging now, in the order they started. */
  readonly hanging: RecordedCall[] = [];

  hasMarker(slotId: string, marker: string): boolean {
    return this.markers.get(slotId)?.has(marker) ?? false;
  }

  /** Calls of one name that started. */
  started(name: CallName): RecordedCall[] {
    return this.calls.filter((c) => c.phase === 'start' && callName(c) === name);
  }

  /** The drivers of one runner (`generation` tells its calls apart from another runner's). */
  driverSet(generation: number): DriverSet {
    const driver: ComponentDriver = {
      provision: async (ctx, slot, options) => {
        const slotId = `${ctx.component}-${ctx.migrationId}`;
        await this.call('provision', ctx, slot, slotId, generation, options, (m) => {
          m.add('provisioned');
          m.add(`version ${String(ctx.spec.version)}`);
        });
        return {
          component: ctx.component,
          slot,
          version: String(ctx.spec.version),
          addresses: [],
          details: { slotId },
        };
      },
      replicate: async (ctx, from, to, options) => {
        await this.call('replicate', ctx, to.slot, slotIdOf(ctx, to), generation, options, (m) => {
          m.add(`replicated-from-${slotIdOf(ctx, from)}`);
        });
      },
      drain: async (ctx, slot, _timeoutMs, options) => {
        await this.call('drain', ctx, slot.slot, slotIdOf(ctx, slot), generation, options, (m) =>
          m.add('drained'),
        );
      },
      retire: async (ctx, slot, options) => {
        await this.call('retire', ctx, slot.slot, slotIdOf(ctx, slot), generation, options, (m) =>
          m.add('retired'),
        );
      },
    };
    return { component: { exec: driver, process: driver, container: driver }, route: {} };
  }

  private async call(
    stage: RecordedStage,
    ctx: ComponentCallContext,
    slot: Slot,
    slotId: string,
    runner: number,
    options: DriverCallOptions,
    mark: (markers: Set<string>) => void,
  ): Promise<void> {
    const call: RecordedCall = { phase: 'start', stage, component: ctx.component, slot, slotId, runner };
    const name = callName(call);
    this.calls.push(call);
    if (this.hang.delete(name)) {
      this.hanging.push(call);
      await new Promise<never>((_, reject) => {
        options.signal.addEventListener('abort', () => reject(options.signal.reason), { once: true });
      });
    }
    if (this.fail.delete(name)) {
      this.calls.push({ ...call, phase: 'end' });
      throw new PermanentDriverError(`${name} failed (told to)`);
    }
    const markers = this.markers.get(slotId) ?? new Set<string>();
    this.markers.set(slotId, markers);
    mark(markers);
    this.calls.push({ ...call, phase: 'end' });
  }
}

/** The slot's id as provision gave it; a slot never recorded (a provision that failed) is this migration's. */
function slotIdOf(ctx: ComponentCallContext, slot: SlotInfo): string {
  return String(slot.details?.slotId ?? `${ctx.component}-${ctx.migrationId}`);
}
