import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { CutoverError } from '../core/errors.js';
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

/** Adds one command (with its subcommands) to its parent: `topology` for the topology commands, else the program. */
type Register = (parent: Command, run: CommandRun, version: string) => void;

/**
 * Each command's module by the word that names it, in the order help lists them. A run that names
 * its command (`cutover topology plan …`) loads only that command's module (a plan starts without
 * the other twelve and what they import); any other (help, a typo, an option before the command)
 * loads them all, so help, suggestions and errors are those of the whole program.
 */
const topologyCommands: Record<string, () => Promise<Register>> = {
  validate: async () => (await import('./commands/topology-validate.js')).registerValidate,
  plan: async () => (await import('./commands/topology-plan.js')).registerPlan,
  migrate: async () => (await import('./commands/topology-migrate.js')).registerMigrate,
  apply: async () => (await import('./commands/topology-apply.js')).registerApply,
  migration: async () => (await import('./commands/topology-migration.js')).registerMigration,
  rollback: async () => (await import('./commands/topology-rollback.js')).registerRollback,
  down: async () => (await import('./commands/topology-down.js')).registerDown,
  status: async () => (await import('./commands/topology-status.js')).registerStatus,
};
const programCommands: Record<string, () => Promise<Register>> = {
  server: async () => {
    const { registerServer } = await import('./commands/server.js');
    return (program, run, version) => registerServer(program, version, run);
  },
  watch: async () => (await import('./commands/watch.js')).registerWatch,
  worker: async () => (await import('./commands/worker.js')).registerWorker,
  proxy: async () => (await import('./commands/proxy.js')).registerProxy,
  internal: async () => (await import('./commands/internal.js')).registerInternal,
  completion: async () => {
    const { registerCompletion } = await import('./commands/completion.js');
    return (program, run) =>
      registerCompletion(program, run, async () =>
        buildProgram(run, await commandsFor(['node', 'cutover', '--help'])),
      );
  },
};

/** The commands a command line needs: the one it names, or all of them. */
async function commandsFor(argv: readonly string[]): Promise<{ topology: Register[]; program: Register[] }> {
  const [first, second] = argv.slice(2);
  const load = (table: Record<string, () => Promise<Register>>, names: string[]) =>
    Promise.all(names.map((name) => (table[name] as () => Promise<Register>)()));
  if (first === 'topology' && second !== undefined && Object.hasOwn(topologyCommands, second)) {
    return { topology: await load(topologyCommands, [second]), program: [] };
  }
  if (first !== undefined && Object.hasOwn(programCommands, first)) {
    return { topology: [], program: await load(programCommands, [first]) };
  }
  return {
    topology: await load(topologyCommands, Object.keys(topologyCommands)),
    program: await load(programCommands, Object.keys(programCommands)),
  };
}

/** The commander program of one run: its commands (`commands`, see commandsFor) write to the run's streams. */
export function buildProgram(
  run: CommandRun,
  commands: { topology: readonly Register[]; program: readonly Register[] },
): Command {
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

Documentation: docs/README.md in the cutover package (every command: docs/reference/cli.md);
the topology schema: schemas/topology.v1.json`,
    );
  const topology = program
    .command('topology')
    .description('validate, plan and migrate topologies; operate migrations')
    .addHelpText('after', '\nExample:\n  $ cutover topology plan -f examples/web-app/topology.yaml');
  for (const register of commands.topology) register(topology, run, version);
  for (const register of commands.program) register(program, run, version);
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
  const program = buildProgram(run, await commandsFor(argv));
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
