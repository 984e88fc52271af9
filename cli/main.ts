import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { CutoverError } from '../core/errors.js';
import { registerInternal } from './commands/internal.js';
import { registerProxy } from './commands/proxy.js';
import { registerServer } from './commands/server.js';
import { registerApply } from './commands/topology-apply.js';
import { registerDown } from './commands/topology-down.js';
import { registerMigrate } from './commands/topology-migrate.js';
import { registerMigration } from './commands/topology-migration.js';
import { registerPlan } from './commands/topology-plan.js';
import { registerRollback } from './commands/topology-rollback.js';
import { registerStatus } from './commands/topology-status.js';
import { registerValidate } from './commands/topology-validate.js';
import { registerWatch } from './commands/watch.js';
import { registerWorker } from './commands/worker.js';
import { type CommandContext, type CommandRun, commandRun } from './context.js';
import { reportError, wantsJson } from './report-error.js';
import { addSecretsFileOptions } from './secrets-file.js';

/** The package's version, from its package.json: two folders up from dist/cli/, one from the source's cli/. */
function cutoverVersion(): string {
  for (const up of ['../../package.json', '../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as {
        name?: string;
        version: string;
      };
      if (pkg.name === 'cutover') return pkg.version;
    } catch {
      // not there: the other layout
    }
  }
  throw new CutoverError('INTERNAL', 'cannot find the package.json of cutover');
}

/** The commander program of one run: its commands write to the run's streams. */
export function buildProgram(run: CommandRun): Command {
  const version = cutoverVersion();
  const program = new Command('cutover')
    .description('Green-blue migrations of infrastructure layouts, driven by topology files kept in Git.')
    .version(version, '-V, --version')
    .showHelpAfterError('(add --help for usage)')
    .exitOverride()
    .addHelpText(
      'after',
      `
Examples:
  $ cutover topology validate -f topology.yaml
  $ cutover topology plan -f topology.yaml --against-ref origin/main --format markdown

Documentation: README.md; the topology schema: schemas/topology.v1.json`,
    );
  const topology = program
    .command('topology')
    .description('validate, plan and migrate topologies; operate migrations')
    .addHelpText('after', '\nExample:\n  $ cutover topology plan -f examples/web-app/topology.yaml');
  registerValidate(topology, run);
  registerPlan(topology, run);
  registerMigrate(topology, run);
  registerApply(topology, run);
  registerMigration(topology, run);
  registerRollback(topology, run);
  registerDown(topology, run);
  registerStatus(topology, run);
  registerServer(program, version, run);
  registerWatch(program, run);
  registerWorker(program, run);
  registerProxy(program, run);
  registerInternal(program, run);
  addSecretsFileOptions(program, run);
  // Subcommands inherit the parent's error handling only when told to.
  const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];
  for (const command of all(program)) {
    command
      .exitOverride()
      .showHelpAfterError('(add --help for usage)')
      .configureOutput({
        writeOut: (text) => run.stdout.write(text),
        writeErr: (text) => run.stderr.write(text),
        // As commander measures the process's: the terminal's width, else its default.
        getOutHelpWidth: () => (run.stdout.isTTY ? run.stdout.columns : undefined) as number,
        getErrHelpWidth: () => (run.stderr.isTTY ? run.stderr.columns : undefined) as number,
        // Help has no colours of its own: nothing to keep or strip.
        getOutHasColors: () => false,
        getErrHasColors: () => false,
      });
  }
  return program;
}

/**
 * Runs the command line `argv` (as process.argv: node, script, then the arguments) with the
 * context's streams, environment and working directory, and returns its exit code. Nothing here
 * touches the process: `cli/wire-process.ts` hands it the real one.
 */
export async function main(argv: string[], context: CommandContext): Promise<number> {
  const run = commandRun(context);
  const program = buildProgram(run);
  const output = { json: wantsJson(argv), stdout: context.stdout, stderr: context.stderr };
  try {
    await program.parseAsync(argv);
    return run.exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here with code 0; usage errors were already printed by commander
      // (and, with --json, are told once more as JSON, where the caller reads).
      if (error.exitCode === 0) return 0;
      if (output.json) reportError(new CutoverError('USAGE', error.message.replace(/^error: /, '')), output);
      return 1;
    }
    return reportError(error, output);
  }
}
