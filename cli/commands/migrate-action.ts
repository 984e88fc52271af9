import { environmentFault } from '../../core/errors.js';
import type { MigrationSummary } from '../../core/migration/summary.js';
import type { PlannedAgainst } from '../../core/plan/saved-plan.js';
import type { Plan } from '../../core/plan/types.js';
import { isEmptyPlan } from '../../core/plan/types.js';
import { baseDirOf, commitOfFile, readTopology, shortPlanId } from '../../engine/api.js';
import type { MigrationService, StartResult } from '../../engine/services/migration-service.js';
import { summaryJson } from '../../views/migration-json.js';
import { renderPlanText } from '../../views/render-plan-text.js';
import { confirmedOrRefused } from '../confirm.js';
import { type CommandContext, pathIn, styleOf } from '../context.js';
import { liveOutput } from '../live-output.js';
import { dashboardLine, type ServerOption, withService } from '../service.js';

export interface MigrateOptions extends ServerOption {
  file: string;
  yes?: boolean;
  detach?: boolean;
  planId?: string;
  json?: boolean;
  replace?: string[];
  /** `--parallelism N`: how many driver calls run at once. */
  parallelism?: number;
  /** The Git commit the topology comes from, recorded with the migration (audit). */
  commit?: string;
  /** `--allow-absent-hosts`: start although no worker polls a host the topology names. */
  allowAbsentHosts?: boolean;
}

/** `cutover topology migrate`, loaded only when that command runs (it pulls in the whole engine). */
export async function runMigrate(options: MigrateOptions, context: CommandContext): Promise<number> {
  return withService(context, options, (service) => migrate(options, service, context));
}

/**
 * Plans, asks, starts, and (without --detach) follows the migration to its end. Locally the
 * migration runs in this process (with a live view on a terminal) and is handed to a background
 * runner if this process is interrupted; elsewhere (Temporal, a server) it is followed by its log.
 */
async function migrate(
  options: MigrateOptions,
  service: MigrationService,
  context: CommandContext,
): Promise<number> {
  // Named as the user wrote it, read where the command runs (see cli/context.ts).
  const file = pathIn(context, options.file);
  const desired = await readTopology(file, options.file);
  const replace = options.replace ?? [];
  const request = {
    ...desired,
    baseDir: baseDirOf(file),
    ...(replace.length > 0 ? { replace } : {}),
    ...(options.commit === undefined ? {} : { commit: options.commit, commitFrom: 'option' as const }),
    appliedCommit: await commitOfFile(file),
    ...(options.parallelism === undefined ? {} : { parallelism: options.parallelism }),
    ...(options.allowAbsentHosts === true ? { allowAbsentHosts: true } : {}),
  };
  return migrateTo(
    service,
    {
      plan: () => service.plan(desired, { kind: 'recorded' }, replace.length > 0 ? { replace } : {}),
      start: (pin) => service.start({ ...request, ...pin }),
    },
    options,
    context,
  );
}

/** A migration to show, confirm and run: to a file's topology, or back to a recorded layout. */
export interface MigrationToRun {
  /** Its plan, against the recorded layout. */
  plan(): Promise<Plan>;
  /** What that plan is against, for its header (default: said from its serial). */
  against?: PlannedAgainst;
  /** Starts it, refusing unless its plan is still `planId`. */
  start(pin: { planId: string; attach: boolean }): Promise<StartResult>;
}

/**
 * Shows the plan, asks (`question`), starts the migration and follows it to its end (all that
 * `migrate` does once it has read the file); `topology rollback` runs its migration through here
 * too. Exit code 0 once completed (or with nothing to do).
 */
export async function migrateTo(
  service: MigrationService,
  run: MigrationToRun,
  options: Omit<MigrateOptions, 'file'>,
  context: CommandContext,
  question = (environment: string) => `Migrate environment ${environment} with this plan?`,
): Promise<number> {
  const { stdout, stderr } = context;
  const style = styleOf(context, stderr);
  const plan = await run.plan();
  const attach = options.detach !== true;
  let started: StartResult | null = null;
  if (options.planId !== undefined && options.planId !== plan.planId) {
    // Refused with the reason (the plan is stale, or differs) before anything is shown or asked,
    // even when there is nothing to do now: the pinned plan is not what would run. Planned again
    // under the environment's claim, the pinned plan can be what runs after all (what runs changed
    // back between the two looks): then it has started, as the reviewed plan it is.
    started = await run.start({ attach, planId: options.planId });
    if (started.created) stderr.write(`The reviewed plan ${shortPlanId(options.planId)} is what runs now.\n`);
  }
  if (started === null) {
    if (!options.json)
      stderr.write(renderPlanText(plan, { style, ...(run.against ? { against: run.against } : {}) }));
    if (isEmptyPlan(plan)) {
      if (options.json) printJson(stdout, { summary: null, planId: plan.planId });
      return 0;
    }
    if (!(await confirmed(options, question(plan.environment), context))) return 1;
    // Pin the plan that was shown: if the layout moved meanwhile, this refuses rather than surprises.
    started = await run.start({ attach, planId: options.planId ?? plan.planId });
  }
  if (!started.created) return 0;
  if (started.notice) stderr.write(`cutover: ${started.notice}\n`);
  const { id } = started.summary;
  const hint = service.reachAgain;
  if (options.detach) {
    // The summary was read before its runner was spawned: the runner's pid comes from the start.
    if (options.json)
      printJson(stdout, {
        summary: { ...started.summary, runnerPid: started.runnerPid },
        planId: started.planId,
      });
    else stdout.write(`${id}\n`);
    stderr.write(
      `Migration ${id} runs ${started.runs}. Follow it with:\n  cutover topology migration logs ${id} --follow${hint}\n${dashboardLine(service, id)}`,
    );
    return 0;
  }
  stderr.write(
    `\nMigration ${id} started${started.runs ? ` ${started.runs}` : ''}. From another terminal: cutover topology migration pause|rollback|… ${id}${hint}\n${dashboardLine(service, id)}\n`,
  );
  const output = options.json ? null : await liveOutput(stderr, style);
  const commitHint = `awaiting commit: run \`cutover topology migration commit ${id}${hint}\``;
  let reachedAwaitingCommit = () => {};
  const awaitingCommit = new Promise<'awaiting_commit'>((resolve) => {
    reachedAwaitingCommit = () => resolve('awaiting_commit');
  });
  const attached = await service.attach(id, (line, state) => {
    // A manual hold waits for a person as a manual commit does: --json answers there too.
    if (line.kind === 'awaiting_promotion' && options.json) {
      stderr.write(`awaiting promotion: run \`cutover topology migration promote ${id}${hint}\`\n`);
      reachedAwaitingCommit();
      return;
    }
    if (line.kind === 'awaiting_commit') {
      // The log's own line names no options; this one reaches the migration again from here.
      output?.done();
      stderr.write(`${commitHint}\n`);
      reachedAwaitingCommit();
      return;
    }
    output?.line(line, state);
  });
  const onSignal = () => {
    // The migration must not die with this terminal: it goes on without it.
    void attached
      .leave()
      .then((where) => {
        output?.done();
        stderr.write(`\nInterrupted: ${id} goes on ${where}.\n`);
        process.exit(130);
      })
      .catch((error: unknown) => {
        stderr.write(
          `\ncutover: interrupted, and no background runner could take ${id} over: ${(environmentFault(error) ?? (error as Error)).message.split('\n')[0]}; \`cutover topology migration resume ${id}\` picks it up\n`,
        );
        process.exit(1);
      });
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const ended = attached.done();
  let first: Awaited<typeof ended> | 'awaiting_commit';
  try {
    // With --json the caller wants an answer, and a manual commit (or promotion) may never come:
    // return once the migration waits for it, and let it wait without this process.
    first = options.json ? await Promise.race([ended, awaitingCommit]) : await ended;
  } finally {
    // Also when the run stopped on a fault: the process (a server, a test) outlives the command.
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  output?.done();
  if (first === 'awaiting_commit') {
    ended.catch(() => {}); // the follow stops with leave(); its end is no news
    const where = await attached.leave();
    const { summary } = await service.show(id);
    const awaiting = summary.lifecycle === 'awaiting_promotion' ? 'promotion' : 'commit';
    stderr.write(`${id} goes on ${where}, awaiting its ${awaiting}.\n`);
    printJson(stdout, { summary, planId: started.planId });
    return 0;
  }
  if (options.json) printJson(stdout, { summary: first, planId: started.planId });
  else stdout.write(`${id}: ${first.status}\n`);
  return first.lifecycle === 'completed' ? 0 : 1;
}

/** `migrate --json`'s one shape: `{summary, planId}`, summary null when nothing was started. */
function printJson(
  stdout: NodeJS.WritableStream,
  out: { summary: MigrationSummary | null; planId: string },
): void {
  const summary = out.summary === null ? null : summaryJson(out.summary);
  stdout.write(`${JSON.stringify({ summary, planId: out.planId }, null, 2)}\n`);
}

/** --yes, or a yes on the terminal; false (exit 1) when declined. */
async function confirmed(
  options: Pick<MigrateOptions, 'yes'>,
  question: string,
  context: CommandContext,
): Promise<boolean> {
  if (await confirmedOrRefused(options.yes, 'migrate', `\n${question}`, context)) return true;
  context.stderr.write('Migration not started.\n');
  return false;
}
