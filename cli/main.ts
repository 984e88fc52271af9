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
import { reportError, wantsJson } from './report-error.js';
import { addSecretsFileOptions } from './secrets-file.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

export function buildProgram(): Command {
  const program = new Command('cutover')
    .description('Green-blue migrations of infrastructure layouts, driven by topology files kept in Git.')
    .version(pkg.version, '-V, --version')
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
  registerValidate(topology);
  registerPlan(topology);
  registerMigrate(topology);
  registerApply(topology);
  registerMigration(topology);
  registerRollback(topology);
  registerDown(topology);
  registerStatus(topology);
  registerServer(program, pkg.version);
  registerWatch(program);
  registerWorker(program);
  registerProxy(program);
  registerInternal(program);
  addSecretsFileOptions(program);
  // Subcommands inherit the parent's error handling only when told to.
  const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];
  for (const command of all(program)) command.exitOverride().showHelpAfterError('(add --help for usage)');
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here with code 0; usage errors were already printed by commander
      // (and, with --json, are told once more as JSON, where the caller reads).
      if (error.exitCode === 0) return 0;
      if (wantsJson(argv))
        reportError(new CutoverError('USAGE', error.message.replace(/^error: /, '')), { json: true });
      return 1;
    }
    return reportError(error, { json: wantsJson(argv) });
  }
}

// A reader that stops early (`cutover topology migration logs ID | head`) closes the pipe: that is
// the end of the output, not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

process.exitCode = await main(process.argv);
