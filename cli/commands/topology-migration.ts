import type { Command } from 'commander';
import { isFinal, type MigrationState, type Verb, verbs } from '../../engine/migration/types.js';
import type { MigrationService } from '../../engine/migration-service.js';
import type * as Migrations from '../../engine/migrations.js';
import type { LogLine } from '../../engine/runner/local-runner.js';
import { addServerOption, remoteFor, type ServerOption } from '../remote/client.js';
import { renderLogLine, renderMigration, renderMigrationList } from '../render/render-migration.js';
import { styleFor } from '../render/style.js';
import { addStateDirOptions, resolveStateDir, type StateDirOptions } from '../state-dir.js';

/** The remote twins, loaded only for `--server`. */
const remoteCommands = () => import('../remote/commands.js');

/** `-f`, `--state-dir` and `--server`. */
function withOptions(command: Command): Command {
  return addServerOption(addStateDirOptions(command));
}

type Options = StateDirOptions & ServerOption;

/**
 * The migrations of the state directory, or of Temporal when WORKFLOW_HOST is set; loaded when a
 * command runs, not when the CLI starts (plan and validate stay fast). Closed after `use`.
 */
async function withService<T>(options: Options, use: (service: MigrationService) => Promise<T>): Promise<T> {
  const { openMigrationService } = await import('../../engine/migration-service.js');
  const service = await openMigrationService(resolveStateDir(options));
  try {
    return await use(service);
  } finally {
    await service.close();
  }
}

/** In-flight migrations first, then history, newest first: the last 10, or all. */
export function listSelection(
  all: Migrations.MigrationSummary[],
  everything: boolean,
): Migrations.MigrationSummary[] {
  const inFlight = all.filter((m) => !isFinal(m.lifecycle));
  const history = all.filter((m) => isFinal(m.lifecycle));
  return [...inFlight, ...(everything ? history : history.slice(0, 10))];
}

const verbHelp: Record<Verb, string> = {
  pause: 'pause a running migration at the next step boundary (a health gate or bake clock stops)',
  resume: 'resume a paused migration; also picks up a migration whose process died',
  rollback: 'roll back: traffic back to blue first, then green retired (any time before commit)',
  cancel: 'abort an in-flight migration: the same safe end as rollback, recorded as cancelled',
  commit: 'commit a migration that waits for it (manual strategy): the point of no return',
};

export function registerMigration(topology: Command): void {
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
    .action(async (options: Options & { all?: boolean; environment?: string; json?: boolean }) => {
      const remote = remoteFor(options);
      const list = remote
        ? await (await remoteCommands()).remoteList(remote, options)
        : await withService(options, async (service) =>
            listSelection(
              await service.list(
                options.environment === undefined ? {} : { environment: options.environment },
              ),
              options.all === true,
            ),
          );
      if (options.json) process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
      else process.stdout.write(renderMigrationList(list, styleFor(process.stdout)));
    });

  withOptions(migration.command('show').argument('<id>', 'migration id or a unique prefix'))
    .description('show one migration: status and every action with its progress')
    .option('--json', 'print JSON (summary and full state)')
    .addHelpText('after', '\nExample:\n  $ cutover topology migration show mig_01jd3x')
    .action(async (id: string, options: Options & { json?: boolean }) => {
      const remote = remoteFor(options);
      let shown: { summary: Migrations.MigrationSummary; state: MigrationState };
      if (remote) {
        const r = await remoteCommands();
        shown = await r.remoteShow(remote, await r.remoteResolveId(remote, id));
      } else {
        shown = await withService(options, async (service) => service.show(await service.find(id)));
      }
      const { summary, state } = shown;
      if (options.json) process.stdout.write(`${JSON.stringify({ summary, state }, null, 2)}\n`);
      else process.stdout.write(renderMigration(summary, state, styleFor(process.stdout)));
    });

  withOptions(migration.command('logs').argument('<id>', 'migration id or a unique prefix'))
    .description('show the log of a migration')
    .option('--follow', 'keep printing new lines until the migration ends')
    .option('--json', 'print JSON lines')
    .addHelpText('after', '\nExample:\n  $ cutover topology migration logs mig_01jd3x --follow')
    .action(async (id: string, options: Options & { follow?: boolean; json?: boolean }) => {
      const remote = remoteFor(options);
      const follow = options.follow === true;
      const style = styleFor(process.stdout);
      const print = async (lines: AsyncGenerator<LogLine>) => {
        for await (const line of lines) {
          process.stdout.write(
            options.json ? `${JSON.stringify(line)}\n` : `${renderLogLine(line, style)}\n`,
          );
        }
      };
      if (remote) {
        const r = await remoteCommands();
        await print(r.remoteLog(remote, await r.remoteResolveId(remote, id), follow));
      } else {
        await withService(options, async (service) =>
          print(service.logs(await service.find(id), { follow })),
        );
      }
    });

  for (const verb of verbs) {
    withOptions(migration.command(verb).argument('<id>', 'migration id or a unique prefix'))
      .description(verbHelp[verb])
      .option('--json', 'print the resulting state as JSON')
      .addHelpText('after', `\nExample:\n  $ cutover topology migration ${verb} mig_01jd3x`)
      .action(async (id: string, options: Options & { json?: boolean }) => {
        const remote = remoteFor(options);
        let outcome: { summary: Migrations.MigrationSummary; recovered: boolean };
        if (remote) {
          const r = await remoteCommands();
          outcome = await r.remoteVerb(remote, await r.remoteResolveId(remote, id), verb);
        } else {
          outcome = await withService(options, async (service) =>
            service.verb(await service.find(id), verb, process.env.USER),
          );
        }
        const { summary, recovered } = outcome;
        if (options.json) {
          process.stdout.write(`${JSON.stringify({ summary, recovered }, null, 2)}\n`);
          return;
        }
        if (recovered)
          process.stderr.write(`${summary.id} had no running process; a new one picked it up.\n`);
        process.stdout.write(`${summary.id}: ${summary.status}\n`);
      });
  }
}
