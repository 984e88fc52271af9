import type { Command } from 'commander';
import type { CommandRun } from '../context.js';
import { addServerOption } from '../service.js';
import type { RollbackOptions } from './rollback-action.js';

export function registerRollback(topology: Command, run: CommandRun): void {
  addServerOption(topology.command('rollback'))
    .description(
      'go back to an earlier recorded layout after a commit: plan it against the current one and run it as an ordinary green-blue migration',
    )
    .requiredOption(
      '--to <layout>',
      'previous (the layout before the current one), a migration id (the layout it committed), or serial:<n>',
    )
    .option(
      '-f, --file <file>',
      'a topology file: names the environment and its state directory (.cutover/ beside it)',
      'topology.yaml',
    )
    .option('--environment <name>', 'the environment, when the file does not load (e.g. a broken commit)')
    .option(
      '--state-dir <dir>',
      'the state directory (default: CUTOVER_STATE_DIR, else .cutover/ beside the file)',
    )
    .option('-y, --yes', 'do not ask for confirmation (required when not on a terminal)')
    .option('--detach', 'run the migration in a background process and return at once')
    .option('--plan-id <id>', 'refuse to run unless the plan is exactly this reviewed one')
    .option('--json', 'print the final state as JSON instead of the live view')
    .addHelpText(
      'after',
      `
The earlier layout becomes a new serial: history is never rewritten, and the file in Git is not
changed (revert it there too, or the next \`migrate\` goes forward again). Relative paths resolve
where they did when that layout was migrated. The last 20 layouts are kept (CUTOVER_KEEP_LAYOUTS).
Not to be confused with \`cutover topology migration rollback <id>\`, which stops a migration that
has not committed yet and leaves blue serving.

Exit codes: 0 completed (or nothing to do, or detached), 1 failed, rolled back, cancelled or error.

Examples:
  $ cutover topology rollback --to previous -f examples/live-demo/topology.yaml
  $ cutover topology rollback --to mig_01jd3x --yes
  $ cutover topology rollback --to serial:4 --environment shop --state-dir /var/lib/cutover`,
    )
    .action(
      run.action(async (options: RollbackOptions) =>
        (await import('./rollback-action.js')).runRollback(options, run),
      ),
    );
}
