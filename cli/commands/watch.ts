import type { Command } from 'commander';
import { CutoverError } from '../../core/errors.js';
import { parseDuration } from '../../core/topology/duration.js';
import { type CommandRun, pathIn } from '../context.js';
import { addHealOptions, type HealCommandOptions, healOptions } from '../heal-options.js';

interface WatchCommandOptions extends HealCommandOptions {
  repo: string;
  branch: string;
  file?: string[];
  glob?: string;
  interval: string;
  apply?: boolean;
  out?: string;
  once?: boolean;
  stateDir?: string;
  verbose?: boolean;
}

export function registerWatch(program: Command, run: CommandRun): void {
  addHealOptions(program.command('watch'), 'each environment planned')
    .description('plan every new commit of a branch that changes a topology; optionally apply it')
    .requiredOption('--repo <path|url>', 'a local repository, or a remote URL (file://, https://, ssh://)')
    .option('--branch <name>', 'the branch to follow', 'main')
    .option('--file <path...>', 'topology file(s), as paths in the repository (default: topology.yaml)')
    .option('--glob <pattern>', "topology files by pattern, e.g. 'envs/*/topology.yaml'")
    .option('--interval <duration>', "a remote's fetch interval (local repositories are watched)", '30s')
    .option('--apply', 'start a migration for each new plan (one at a time per environment)')
    .option(
      '--out <dir>',
      'where reports go: <dir>/<environment>/<short-sha>.plan.md, .plan.json, .saved-plan.json (default: <state>/watch/reports/)',
    )
    .option('--once', 'plan the current head, write its reports, and exit (for cron and CI)')
    .option('--verbose', 'also log each look that found nothing to do (debug: lines)')

    .option(
      '--state-dir <dir>',
      'the state directory (default: CUTOVER_STATE_DIR, else .cutover/ beside each file in a local working tree, else ./.cutover)',
    )
    .addHelpText(
      'after',
      `
Files are read from commits, never from the working tree; a migration runs the commit's own tree.
A commit that leaves a topology's normalised model as it was (comments, key order, quoting) is not
planned again. Each plan is published as a report with its saved plan, in the state directory
(<state>/watch/reports/<environment>/) unless --out says where. With --apply, the migration is
pinned to that saved plan (its plan id and base serial): a plan refused as stale (the layout moved
since) is said so, planned again and that plan applied; each migration is followed to its end,
which is logged (completed, failed: reason, rolled back, cancelled) and written into the report
(<short-sha>.outcome.json, and the markdown's last line). A commit that lands while a migration
is in flight for its environment waits, and only the newest waiting commit is applied after it. A remote is fetched at once when \`cutover server\` (same state directory)
receives a signed webhook at POST /v1/hooks/git.

With --once the exit code is 0 when every topology is valid (and, with --apply, its migration
started, or there was nothing to change; follow the migration with \`cutover topology migration
logs\`); 1 when one is invalid, when --apply could not start a migration (another is in flight
for that environment, and --once does not wait; or any other error, logged), or when the branch
does not exist.

Examples:
  $ cutover watch --repo . --file examples/exec-demo/topology.yaml
  $ cutover watch --repo https://git.example/infra.git --glob 'envs/*/topology.yaml' --interval 1m --apply
  $ cutover watch --repo . --once --out plans/
  $ cutover watch --repo . --file app/topology.yaml --self-heal --heal-interval 5s

With --self-heal, each look plans the environment's recorded topology against what runs (as
\`cutover topology plan\` does); drift, with no migration in flight, starts a migration of the
recorded topology, which repairs it. A repair that fails is retried after a backoff (the interval,
doubled at each failure, at most 10 minutes); more than --heal-max-repairs repairs in an hour
stop healing that environment. Every repair is a log line naming what drifted and the migration.`,
    )
    .action(run.action((options: WatchCommandOptions) => runWatch(options, run)));
}

async function runWatch(options: WatchCommandOptions, run: CommandRun): Promise<number> {
  if (options.file !== undefined && options.glob !== undefined) {
    throw new CutoverError('USAGE', '--file and --glob cannot be used together');
  }
  const intervalMs = parseDuration(options.interval);
  if (intervalMs === undefined || intervalMs < 100) {
    throw new CutoverError(
      'USAGE',
      `--interval: expected a duration of at least 100ms like 30s or 2m, not ${options.interval}`,
    );
  }
  const selfHeal = healOptions(options);
  if (selfHeal && options.once) throw new CutoverError('USAGE', '--self-heal cannot be used with --once');
  const { Watcher } = await import('../../watch/watcher.js');
  const { looksRemote } = await import('../../watch/git.js');
  const log = (line: string) => run.stdout.write(`${new Date().toISOString()} ${line}\n`);
  const stateDir = options.stateDir ?? run.env.CUTOVER_STATE_DIR;
  const watcher = new Watcher({
    repo: looksRemote(options.repo) ? options.repo : pathIn(run, options.repo),
    branch: options.branch,
    files: options.file ?? ['topology.yaml'],
    ...(options.glob === undefined ? {} : { glob: options.glob }),
    intervalMs,
    apply: options.apply === true,
    ...(options.out === undefined ? {} : { outDir: pathIn(run, options.out) }),
    ...(stateDir === undefined ? {} : { stateDir: pathIn(run, stateDir) }),
    env: run.env,
    log,
    ...(options.verbose ? { trace: (line: string) => log(`debug: ${line}`) } : {}),
    ...(selfHeal ? { selfHeal } : {}),
  });
  if (options.once) {
    const reports = await watcher.once();
    // 1 when a commit is invalid, or --apply could not start its migration (one in flight, or an error).
    return reports.some((r) => r.kind === 'invalid' || r.queued || r.notApplied) ? 1 : 0;
  }
  await watcher.start();
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log(`${signal}: stopping (migrations it started go on)`);
      void watcher.stop().then(resolve);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}
