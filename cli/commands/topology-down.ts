import type { Command } from 'commander';
import { confirmedOrRefused } from '../confirm.js';
import { type CommandRun, pathIn } from '../context.js';
import { addServerOption, type ServerOption, withService } from '../service.js';

export function registerDown(topology: Command, run: CommandRun): void {
  addServerOption(topology.command('down'))
    .description("stop every process and route of the file's environment, and record an empty layout")
    .option(
      '-f, --file <file>',
      'the topology file (names the environment and its state directory)',
      'topology.yaml',
    )
    .option('-y, --yes', 'do not ask for confirmation (required when not on a terminal)')
    .option('--json', 'print what was stopped as JSON')
    .option(
      '--volumes',
      "also remove the volumes drivers made for the components (container drivers' named volumes); refused when no component has any",
    )
    .addHelpText(
      'after',
      '\nAsks on a terminal unless --yes. Refused while a migration is in flight (cancel it first); exit 1 for an environment never migrated. Volumes are kept unless --volumes.\n\nExamples:\n  $ cutover topology down -f examples/web-app/topology.yaml --yes\n  $ cutover topology down -f topology.yaml --yes --volumes',
    )
    .action(
      run.action(async (options: DownOptions) => {
        // Loaded when down runs, not when the CLI starts (see topology-validate.ts).
        const { TopologyInvalidError, validateTopologyText, readTopology, baseDirOf } = await import(
          '../../engine/api.js'
        );
        const file = pathIn(run, options.file);
        const loaded = validateTopologyText(await readTopology(file, options.file));
        if (!loaded.ok) throw new TopologyInvalidError(loaded.diagnostics);
        const environment = loaded.topology.metadata.name;
        const question = `\nTake environment ${environment} down? Every route and process of it stops.`;
        if (!(await confirmedOrRefused(options.yes, `take environment ${environment} down`, question, run))) {
          run.stderr.write('Nothing was stopped.\n');
          return 1;
        }
        const result = await withService(run, options, (service) =>
          service.down(environment, {
            fallbackBaseDir: baseDirOf(file),
            ...(options.volumes ? { volumes: true } : {}),
            log: (line) => {
              if (!options.json) run.stderr.write(`${line}\n`);
            },
          }),
        );
        if (options.json) {
          run.stdout.write(
            `${JSON.stringify({ environment, components: result.components, routes: result.routes }, null, 2)}\n`,
          );
        } else if (result.components.length === 0 && result.routes.length === 0) {
          run.stdout.write(`${environment}: nothing is running\n`);
        } else {
          run.stdout.write(
            `${environment}: stopped ${count(result.components.length, 'component')} and ${count(result.routes.length, 'route')}\n`,
          );
        }
        return 0;
      }),
    );
}

type DownOptions = { file: string; json?: boolean; yes?: boolean; volumes?: boolean } & ServerOption;

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
