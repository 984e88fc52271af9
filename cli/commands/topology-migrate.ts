import type { Command } from 'commander';
import type { CommandRun } from '../context.js';
import { addParallelismOption } from '../parallelism-option.js';
import { addServerOption } from '../service.js';
import type { MigrateOptions } from './migrate-action.js';
import { collectNames } from './topology-plan.js';

export function registerMigrate(topology: Command, run: CommandRun): void {
  addParallelismOption(addServerOption(topology.command('migrate')))
    .description('apply the topology as a green-blue migration: plan, confirm, then run it stage by stage')
    .option('-f, --file <file>', 'the desired topology file', 'topology.yaml')
    .option('-y, --yes', 'do not ask for confirmation (required when not on a terminal)')
    .option('--detach', 'run the migration in a background process and return at once')
    .option(
      '--plan-id <id>',
      'refuse to run unless the plan is exactly this reviewed one (see `plan --json`)',
    )
    .option('--json', 'print the final state as JSON instead of the live view')
    .option('--commit <sha>', 'the Git commit the topology comes from, recorded with the migration (audit)')
    .option(
      '--allow-absent-hosts',
      'start although no worker polls a host the topology names (Temporal mode): its calls there wait for one',
    )
    .option(
      '--replace <component>',
      'replace this component green-blue even if nothing changed, like terraform apply -replace (repeatable)',
      collectNames,
      [],
    )
    .addHelpText(
      'after',
      `
Before planning, migrate observes what runs, so drift (a dead replica, a route not served) is
repaired: a drifted component is replaced green-blue, a drifted route applied again.
Actions whose dependencies are done run at once, up to --parallelism driver calls (the plan's waves).

Exit codes: 0 completed (or nothing to do, or detached), 1 failed, rolled back, cancelled or error.
From another terminal: cutover topology migration list|show|logs|pause|resume|rollback|cancel|commit.

Examples:
  $ cutover topology migrate -f examples/exec-demo/topology.yaml
  $ cutover topology migrate --yes --plan-id sha256:3f1c… --detach
  $ cutover topology migrate --replace api --yes
  $ cutover topology migrate --parallelism 4 --yes`,
    )
    .action(
      run.action(async (options: MigrateOptions) =>
        (await import('./migrate-action.js')).runMigrate(options, run),
      ),
    );
}
