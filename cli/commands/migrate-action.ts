import { createLogUpdate } from 'log-update';
import { CutoverError, environmentFault } from '../../core/errors.js';
import type { LogLine } from '../../core/migration/types.js';
import { isEmptyPlan } from '../../core/plan/types.js';
import { baseDirOf, readTopology } from '../../engine/api.js';
import type { MigrationService } from '../../engine/services/migration-service.js';
import { renderLiveView, renderLogLine } from '../../views/render-migration.js';
import { renderPlanText } from '../../views/render-plan-text.js';
import { styleFor } from '../../views/style.js';
import { confirm } from '../confirm.js';
import { type ServerOption, withService } from '../service.js';

export interface MigrateOptions extends ServerOption {
  file: string;
  yes?: boolean;
  detach?: boolean;
  planId?: string;
  json?: boolean;
  replace?: string[];
}

/** How many log lines the live view keeps under the migration's state. */
const liveViewLines = 20;

/** `cutover topology migrate`, loaded only when that command runs (it pulls in the whole engine). */
export async function runMigrate(options: MigrateOptions): Promise<void> {
  await withService(options, (service) => migrate(options, service));
}

/**
 * Plans, asks, starts, and (without --detach) follows the migration to its end. Locally the
 * migration runs in this process (with a live view on a terminal) and is handed to a background
 * runner if this process is interrupted; elsewhere (Temporal, a server) it is followed by its log.
 */
async function migrate(options: MigrateOptions, service: MigrationService): Promise<void> {
  const style = styleFor(process.stderr);
  const desired = await readTopology(options.file);
  const replace = options.replace ?? [];
  const plan = await service.plan(desired, { kind: 'recorded' }, replace.length > 0 ? { replace } : {});
  if (!options.json) process.stderr.write(renderPlanText(plan, { style }));
  if (isEmptyPlan(plan)) {
    if (options.json) process.stdout.write(`${JSON.stringify({ migration: null, plan: plan.planId })}\n`);
    process.exitCode = 0;
    return;
  }
  const request = {
    ...desired,
    baseDir: baseDirOf(options.file),
    attach: options.detach !== true,
    ...(replace.length > 0 ? { replace } : {}),
  };
  if (options.planId !== undefined && options.planId !== plan.planId) {
    // Refused with the reason (the plan is stale, or differs) before anything is asked.
    await service.start({ ...request, planId: options.planId });
  }
  if (!(await confirmed(options, plan.environment))) return;
  // Pin the plan that was shown: if the layout moved meanwhile, this refuses rather than surprises.
  const started = await service.start({ ...request, planId: options.planId ?? plan.planId });
  if (!started.created) return;
  if (started.notice) process.stderr.write(`cutover: ${started.notice}\n`);
  const { id } = started.summary;
  const hint = service.reachAgain;
  if (options.detach) {
    if (options.json)
      process.stdout.write(`${JSON.stringify({ migration: id, runnerPid: started.runnerPid })}\n`);
    else process.stdout.write(`${id}\n`);
    process.stderr.write(
      `Migration ${id} runs ${started.runs}. Follow it with:\n  cutover topology migration logs ${id} --follow${hint}\n`,
    );
    return;
  }
  process.stderr.write(
    `\nMigration ${id} started${started.runs ? ` ${started.runs}` : ''}. From another terminal: cutover topology migration pause|rollback|… ${id}${hint}\n\n`,
  );
  const live = process.stderr.isTTY && !options.json;
  const recent: LogLine[] = [];
  const update = live ? createLogUpdate(process.stderr) : null;
  let viewed = false;
  const attached = await service.attach(id, (line, state) => {
    if (update && state) {
      recent.push(line);
      if (recent.length > liveViewLines) recent.shift();
      update(renderLiveView(state, recent, style));
      viewed = true;
    } else if (!options.json) {
      process.stderr.write(`${renderLogLine(line, style)}\n`);
    }
  });
  const onSignal = () => {
    // The migration must not die with this terminal: it goes on without it.
    void attached
      .leave()
      .then((where) => {
        if (viewed) update?.done();
        process.stderr.write(`\nInterrupted: ${id} goes on ${where}.\n`);
        process.exit(130);
      })
      .catch((error: unknown) => {
        process.stderr.write(
          `\ncutover: interrupted, and no background runner could take ${id} over: ${(environmentFault(error) ?? (error as Error)).message.split('\n')[0]}; \`cutover topology migration resume ${id}\` picks it up\n`,
        );
        process.exit(1);
      });
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const summary = await attached.done();
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  if (viewed) update?.done();
  if (options.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  else process.stdout.write(`${id}: ${summary.status}\n`);
  process.exitCode = summary.lifecycle === 'completed' ? 0 : 1;
}

/** --yes, or a yes on the terminal; false (exit 1) when declined. */
async function confirmed(options: MigrateOptions, environment: string): Promise<boolean> {
  if (options.yes) return true;
  if (!process.stdin.isTTY) {
    throw new CutoverError(
      'USAGE',
      'refusing to migrate without confirmation: standard input is not a terminal; pass --yes',
    );
  }
  if (await confirm(`\nMigrate environment ${environment} with this plan?`)) return true;
  process.stderr.write('Migration not started.\n');
  process.exitCode = 1;
  return false;
}
