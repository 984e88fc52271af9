import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { CutoverError } from '../../core/errors.js';
import { listSelection, type MigrationSummary } from '../../core/migration/summary.js';
import type { LogLine } from '../../core/migration/types.js';
import { isFinal, type Lifecycle, type Verb, verbs } from '../../core/migration/types.js';
import { detailJson, listJson, logLineJson, summaryJson } from '../../views/migration-json.js';
import {
  renderLogLine,
  renderMigration,
  renderMigrationList,
  renderSkippedSteps,
} from '../../views/render-migration.js';
import { type CommandContext, type CommandRun, styleOf } from '../context.js';
import { addServerOption, type ServerOption, withService } from '../service.js';
import { addStateDirOptions, type StateDirOptions } from '../state-dir.js';
import { followEnd, followExitCodes, isConnectionLoss } from './follow-end.js';

/** `-f`, `--state-dir` and `--server`. */
function withOptions(command: Command): Command {
  return addServerOption(addStateDirOptions(command));
}

type Options = StateDirOptions & ServerOption;

const verbHelp: Record<Verb, string> = {
  pause: 'pause a running migration at the next step boundary (a health gate or bake clock stops)',
  resume: 'resume a paused migration; also picks up a migration whose process died',
  rollback:
    'roll back a migration in flight: traffic back to blue first, then green retired (any time before its commit; after a commit, `cutover topology rollback --to previous` migrates back to the earlier layout)',
  cancel: 'abort an in-flight migration: the same safe end as rollback, recorded as cancelled',
  commit: 'commit a migration that waits for it (manual strategy): the point of no return',
  promote:
    'move a migration waiting at a shift step with `hold: manual` on to its next step (--full: straight to 100 %, skipping the steps between)',
};

/**
 * An empty list, saying where it was read: from the wrong state directory it must not read as
 * "none" (a directory that does not exist says so, and how to name another).
 */
function noMigrations(where: string): string {
  if (!where.startsWith('/')) return `No migrations on ${where}.\n`;
  const missing = existsSync(where)
    ? ''
    : ', which does not exist (pass -f FILE or --state-dir DIR, or set CUTOVER_STATE_DIR)';
  return `No migrations in ${where}${missing}.\n`;
}

export function registerMigration(topology: Command, run: CommandRun): void {
  const { stdout, stderr } = run;
  const migration = topology
    .command('migration')
    .description('list, inspect and operate migrations, from any terminal')
    .addHelpText(
      'after',
      '\nExamples:\n  $ cutover topology migration list\n  $ cutover topology migration rollback mig_01jd3x',
    );

  withOptions(migration.command('list'))
    .description('list migrations in flight and recent history')
    .option('--all', 'the whole history, not only the last 10')
    .option('--environment <name>', 'only this environment')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  $ cutover topology migration list --all --json')
    .action(
      run.action(async (options: Options & { all?: boolean; environment?: string; json?: boolean }) => {
        let where = '';
        const list = await withService(run, options, async (service) => {
          where = service.where;
          return listSelection(
            await service.list(options.environment === undefined ? {} : { environment: options.environment }),
            options.all === true,
          );
        });
        // The API's page shape; the CLI's selection is one page, so no cursor follows it.
        if (options.json) stdout.write(`${JSON.stringify(listJson(list, null), null, 2)}\n`);
        // Which state was read: an empty list from the wrong directory must not read as "none".
        else if (list.length === 0) stdout.write(noMigrations(where));
        else stdout.write(renderMigrationList(list, styleOf(run, stdout)));
        for (const m of list) {
          if (m.unreadable) stderr.write(`cutover: ${m.id} is unreadable: ${m.unreadable}\n`);
        }
        return 0;
      }),
    );

  withOptions(migration.command('show').argument('<id>', 'migration id or a unique prefix'))
    .description('show one migration: status and every action with its progress')
    .option('--json', 'print JSON (summary and full state)')
    .addHelpText('after', '\nExample:\n  $ cutover topology migration show mig_01jd3x')
    .action(
      run.action(async (id: string, options: Options & { json?: boolean }) => {
        const { summary, state } = await withService(run, options, async (service) =>
          service.show(await service.find(id)),
        );
        if (options.json) stdout.write(`${JSON.stringify(detailJson({ summary, state }), null, 2)}\n`);
        else stdout.write(renderMigration(summary, state, styleOf(run, stdout)));
        return 0;
      }),
    );

  withOptions(migration.command('logs').argument('<id>', 'migration id or a unique prefix'))
    .description('show the log of a migration')
    .option('--follow', 'keep printing new lines until the migration ends, then say why it stopped')
    .option('--json', 'print JSON lines')
    .addHelpText(
      'after',
      `
With --follow, the last line (on stderr) says why it stopped, and the exit code tells it apart:
  ${followExitCodes.ended}  the migration ended: "migration completed", "rolled back: <reason>", "cancelled: …", "failed: …"
  ${followExitCodes.runnerDied}  its runner died: "runner died (pid N): resume with \`cutover topology migration resume <id>\`"
  ${followExitCodes.connectionLost}  the connection to the server, Temporal or the runner was lost; the migration goes on

Example:
  $ cutover topology migration logs mig_01jd3x --follow`,
    )
    .action(
      run.action(async (id: string, options: Options & { follow?: boolean; json?: boolean }) => {
        const follow = options.follow === true;
        const style = styleOf(run, stdout);
        const print = async (lines: AsyncGenerator<LogLine>) => {
          for await (const line of lines) {
            stdout.write(
              options.json ? `${JSON.stringify(logLineJson(line))}\n` : `${renderLogLine(line, style)}\n`,
            );
          }
        };
        return withService(run, options, async (service) => {
          const full = await service.find(id);
          const followAgain = `cutover topology migration logs ${full} --follow${service.reachAgain}`;
          let end: Parameters<typeof followEnd>[0];
          try {
            await print(service.logs(full, { follow }));
            end = { summary: (await service.show(full)).summary };
          } catch (error) {
            if (!follow || !isConnectionLoss(error)) throw error;
            end = { lost: error.message };
          }
          if (!follow) {
            // The lines a dead runner left stop short: say so, with what picks it up.
            if ('summary' in end && end.summary.runner === 'dead')
              stderr.write(`${full}: ${end.summary.status}\n`);
            return 0;
          }
          const ending = followEnd(end, followAgain);
          stderr.write(`${ending.line}\n`);
          return ending.exitCode;
        });
      }),
    );

  withOptions(migration.command('resolve').argument('<id>', 'migration id or a unique prefix'))
    .description('resolve undo steps left for a person: run them again (--retry) or mark them done (--skip)')
    .option('--retry', 'run the undo steps again (the migration rolls back again until they are done)')
    .option('--skip', 'mark them resolved by you: you undid them by hand')
    .option('--step <step>', 'only this step, by its id as `show` lists it (c12); default: every step left')
    .option('--no-wait', 'with --retry, return once the retry is journaled, not when it has run')
    .option('--json', 'print the summary and the steps as JSON')
    .addHelpText(
      'after',
      `
\`show\` lists the undo steps left for a person (undo steps that kept failing during a rollback),
each with its id. Exits 0 when none is left unresolved, 1 otherwise.

Examples:
  $ cutover topology migration show mig_01jd3x
  $ cutover topology migration resolve mig_01jd3x --retry
  $ cutover topology migration resolve mig_01jd3x --skip --step c14`,
    )
    .action(
      run.action(
        async (
          id: string,
          options: Options & {
            retry?: boolean;
            skip?: boolean;
            step?: string;
            wait?: boolean;
            json?: boolean;
          },
        ) => {
          if (options.retry === options.skip) {
            throw new CutoverError('USAGE', 'resolve needs exactly one of --retry and --skip');
          }
          const how = options.retry ? 'retry' : 'skip';
          return withService(run, options, async (service) => {
            const full = await service.find(id);
            const request =
              options.step === undefined ? ({ how } as const) : ({ how, step: options.step } as const);
            let { summary, state } = await service.resolve(full, request, run.env.USER);
            if (how === 'retry' && options.wait !== false) {
              const style = styleOf(run, stderr);
              stderr.write(`${full}: ${summary.status}\n`);
              const before: LogLine[] = [];
              for await (const line of service.logs(full, { follow: false })) before.push(line);
              const isNew = newSince(before);
              for await (const line of service.logs(full, { follow: true })) {
                if (isNew(line) && !options.json) stderr.write(`${renderLogLine(line, style)}\n`);
              }
              ({ summary, state } = await service.show(full));
            }
            const left = (state.ending?.skipped ?? []).filter((s) => s.resolved === undefined);
            if (options.json) {
              stdout.write(`${JSON.stringify({ summary, skipped: state.ending?.skipped ?? [] }, null, 2)}\n`);
            } else {
              stdout.write(
                `${summary.id}: ${summary.status}\n${renderSkippedSteps(state, styleOf(run, stdout)).join('\n')}\n`,
              );
            }
            return left.length === 0 && isFinal(summary.lifecycle) ? 0 : 1;
          });
        },
      ),
    );

  for (const verb of verbs) {
    const command = withOptions(migration.command(verb).argument('<id>', 'migration id or a unique prefix'))
      .description(verbHelp[verb])
      .option('--json', 'print the resulting state as JSON');
    const ends = endOf[verb];
    if (ends) command.option('--no-wait', 'return once the migration took the verb, not when it has ended');
    if (verb === 'promote')
      command.option('--full', 'skip the remaining shift steps: straight to 100 % green');
    const example =
      verb === 'promote'
        ? `\nExample:\n  $ cutover topology migration promote mig_01jd3x\n  $ cutover topology migration promote mig_01jd3x --full`
        : `\nExample:\n  $ cutover topology migration ${verb} mig_01jd3x`;
    command
      .addHelpText(
        'after',
        ends
          ? `\nWaits until the migration has ended, printing its steps; exits 0 when it is ${ends.replace('_', ' ')}.\n${example}`
          : example,
      )
      .action(
        run.action(
          async (id: string, options: Options & { json?: boolean; wait?: boolean; full?: boolean }) => {
            const wait = ends !== undefined && options.wait !== false;
            return withService(run, options, async (service) => {
              const full = await service.find(id);
              return runVerb(verb, full, options.json === true, wait, run, {
                verb: () =>
                  service.verb(full, verb, run.env.USER, options.full === true ? { full: true } : {}),
                logs: (follow) => service.logs(full, { follow }),
                summary: async () => (await service.show(full)).summary,
                hint: service.reachAgain,
              });
            });
          },
        ),
      );
  }
}

/**
 * Which lines of a log read again later are new since `before` was read. Told apart by time, not
 * by count: a Temporal migration keeps only its last lines, so a later read can start later.
 */
export function newSince(before: readonly LogLine[]): (line: LogLine) => boolean {
  let lastAt = Number.NEGATIVE_INFINITY;
  let atLast = new Set<string>();
  for (const line of before) {
    if (line.at > lastAt) [lastAt, atLast] = [line.at, new Set()];
    if (line.at === lastAt) atLast.add(JSON.stringify(line));
  }
  return (line) => line.at > lastAt || (line.at === lastAt && !atLast.has(JSON.stringify(line)));
}

/** The verbs that end a migration, and the end each asks for. */
const endOf: Partial<Record<Verb, Lifecycle>> = {
  rollback: 'rolled_back',
  cancel: 'cancelled',
  commit: 'completed',
};

/** How long a waiting verb leaves the runner alone before it first reads the log. */
const firstLookMs = 200;

/** What a verb needs of the migration it acts on. */
interface VerbOps {
  verb(): Promise<{ summary: MigrationSummary; recovered: boolean }>;
  /** The log; with `follow`, until the migration ends. */
  logs(follow: boolean): AsyncGenerator<LogLine>;
  summary(): Promise<MigrationSummary>;
  /** The option that reaches the migration again from another terminal. */
  hint: string;
}

/**
 * Gives the verb; with `wait`, follows the log from there (the undo steps of a rollback, the
 * teardown after a commit) and prints the end: exit 0 when the migration ended as the verb asked.
 */
async function runVerb(
  verb: Verb,
  id: string,
  json: boolean,
  wait: boolean,
  context: CommandContext,
  ops: VerbOps,
): Promise<number> {
  const { stdout, stderr } = context;
  const before: LogLine[] = [];
  if (wait) for await (const line of ops.logs(false)) before.push(line);
  const isNew = newSince(before);
  const { summary, recovered } = await ops.verb();
  if (recovered) stderr.write(`${summary.id} had no running process; a new one picked it up.\n`);
  if (!wait) {
    if (json) stdout.write(`${JSON.stringify({ summary: summaryJson(summary), recovered }, null, 2)}\n`);
    else stdout.write(`${summary.id}: ${summary.status}\n`);
    return 0;
  }
  const style = styleOf(context, stderr);
  if (!json) stderr.write(`${summary.id}: ${summary.status}\n`);
  const onSignal = (signal: NodeJS.Signals) => {
    stderr.write(
      `\nInterrupted: ${id} goes on. Follow it with:\n  cutover topology migration logs ${id} --follow${ops.hint}\n`,
    );
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    // The runner has only just taken the verb; its lines come as it acts. Reading at once (a
    // journal replay, the log) would put this process on the CPU in the very milliseconds the
    // traffic switches back, beside the router on the same machine. One poll interval later, a
    // rollback's switch is over.
    await sleep(firstLookMs);
    for await (const line of ops.logs(true)) {
      if (isNew(line) && !json) stderr.write(`${renderLogLine(line, style)}\n`);
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  const final = await ops.summary();
  if (!isFinal(final.lifecycle)) {
    // The follow ended first: the local runner died (resume picks it up) or the server went away.
    stderr.write(
      `${id} has not ended (${final.status}), and the wait stopped: its runner is not running, or the connection was lost. \`cutover topology migration resume ${id}${ops.hint}\` picks it up; \`cutover topology migration logs ${id} --follow${ops.hint}\` shows the rest.\n`,
    );
  }
  if (json) stdout.write(`${JSON.stringify({ summary: summaryJson(final), recovered }, null, 2)}\n`);
  else stdout.write(`${final.id}: ${final.status}\n`);
  return final.lifecycle === endOf[verb] ? 0 : 1;
}
