import type { Command } from 'commander';
import type { CommandRun } from '../context.js';
import { addParallelismOption } from '../parallelism-option.js';
import { addServerOption } from '../service.js';
import type { ApplyOptions } from './apply-action.js';

export function registerApply(topology: Command, run: CommandRun): void {
  addParallelismOption(addServerOption(topology.command('apply')))
    .description(
      'apply exactly a saved plan (from `plan --out`): refused when the live layout moved since it was planned',
    )
    .argument('<plan>', 'the saved plan file, as `cutover topology plan --out FILE` wrote it')
    .option(
      '-f, --file <file>',
      "refuse unless this topology file is the one planned (same normalised content); its state directory (.cutover/ beside it) is used (default: the saved plan's file)",
    )
    .option('-y, --yes', 'do not ask for confirmation (required when not on a terminal)')
    .option('--detach', 'run the migration in a background process and return at once')
    .option('--json', 'print the final state as JSON instead of the live view')
    .addHelpText(
      'after',
      `
Like terraform apply PLANFILE: the saved plan's topology is planned again against the live layout,
with what runs observed as migrate does, and the migration starts only if that gives exactly the
saved plan. Otherwise it is refused (exit 1), saying which case it is; plan again and review:
  PLAN_STALE     the live layout moved since it was planned (another migration committed first),
                 or what runs changed (drift)
  PLAN_MISMATCH  -f FILE is not the topology that was planned (checked after staleness), or
                 re-planning gives another plan
  PLAN_INVALID   the file is not a saved plan (not JSON, a plan rendering, an unknown version,
                 over 256 MiB), or a part of it was edited after it was saved
The migration records who started it (the OS user, or a server's token name) and the commit.

Exit codes: 0 completed (or nothing to do, or detached), 1 refused, failed, rolled back or cancelled.

Examples:
  $ cutover topology plan -f topology.yaml --out plan.json --format markdown > plan.md
  $ cutover topology apply plan.json
  $ cutover topology apply plan.json --yes --json --server https://cutover.internal:7400
  $ cutover topology apply plan.json -f topology.yaml --yes --detach
  $ cutover topology apply plan.json --parallelism 4 --yes`,
    )
    .action(
      run.action(async (planFile: string, options: ApplyOptions) =>
        (await import('./apply-action.js')).runApply(planFile, options, run),
      ),
    );
}
