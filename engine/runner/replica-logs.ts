/**
 * When a slot fails its health gate, what its replicas wrote last is the first thing one wants:
 * the driver's recent output of each replica goes into the migration log (`migration logs`), one
 * line each, prefixed `[<component> <slot>/<replica>]`. Reading it never changes the outcome: a
 * driver without `logs`, or one that cannot read them, adds a line saying so at most.
 */
import type { ComponentCallContext, ComponentDriver, DriverCallOptions, SlotInfo } from '../drivers/types.js';

/** Lines of each replica's output quoted after a failed gate. */
export const gateFailureLogLines = 20;

export async function quoteReplicaLogs(
  driver: ComponentDriver,
  ctx: ComponentCallContext,
  slot: SlotInfo,
  call: DriverCallOptions,
): Promise<void> {
  if (!driver.logs) return;
  try {
    for (const replica of await driver.logs(ctx, slot, gateFailureLogLines, call)) {
      if (replica.lines.length === 0) {
        call.log(
          `output of ${slot.slot} ${ctx.component} replica ${replica.replica} (${replica.name}): none`,
        );
        continue;
      }
      call.log(
        `output of ${slot.slot} ${ctx.component} replica ${replica.replica} (${replica.name}), last lines:`,
      );
      for (const line of replica.lines)
        call.log(`[${ctx.component} ${slot.slot}/${replica.replica}] ${line}`);
    }
  } catch (error) {
    call.log(`cannot read the output of ${slot.slot} ${ctx.component}: ${(error as Error).message}`);
  }
}
