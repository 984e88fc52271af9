/**
 * When a slot fails its health gate, what its replicas wrote last is the first thing one wants:
 * the driver's recent output of each replica goes into the migration log (`migration logs`), one
 * line each, prefixed `[<component> <slot>/<replica>]`. Reading it never changes the outcome: a
 * driver without `logs`, or one that cannot read them, adds a line saying so at most. And the
 * failure names the replicas that are gone: a probe sees only "connection refused".
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

/**
 * "; 127.0.0.1:4001 (pid 123) is not running (exited)" for each replica of the slot its driver
 * observes gone, to add to a failed gate's message; with `alsoSilent`, "…runs but does not answer
 * there (…)" for each one alive and refusing too. "" when none is, or the driver cannot tell.
 */
export async function goneReplicas(
  driver: ComponentDriver,
  ctx: ComponentCallContext,
  slot: SlotInfo,
  call: DriverCallOptions,
  alsoSilent = false,
): Promise<string> {
  if (!driver.observe) return '';
  try {
    const seen = await driver.observe(ctx, slot, call);
    return seen
      .filter(
        (replica) => replica.state === 'not_running' || (alsoSilent && replica.state === 'not_answering'),
      )
      .map((replica) => {
        const who = replica.address ?? 'a replica';
        const pid = replica.pid === undefined ? '' : ` (pid ${replica.pid})`;
        if (replica.state === 'not_answering')
          return `; ${who}${pid} runs but does not answer there${replica.detail ? ` (${replica.detail})` : ''}`;
        return `; ${who}${pid} is not running (${replica.detail ?? 'gone'})`;
      })
      .join('');
  } catch {
    return '';
  }
}

/**
 * Why the answers a gate or a check got are not the slot's own, or undefined: its probes passed,
 * yet the driver sees replicas gone, so something else answered them (a replica that exited after
 * its start-up grace while another process held its port, or one that handed its port to a daemon
 * of its own and left). Traffic sent there would reach a process cutover neither started nor can stop.
 */
export async function othersAnswer(
  driver: ComponentDriver,
  ctx: ComponentCallContext,
  slot: SlotInfo,
  call: DriverCallOptions,
): Promise<string | undefined> {
  const gone = await goneReplicas(driver, ctx, slot, call);
  if (gone === '') return undefined;
  return `${gone.slice(2)}, yet its address answered the health check: another process answers there, which cutover neither started nor can stop`;
}
