import type { Command } from 'commander';
import { confirmedOrRefused } from '../confirm.js';
import { addServerOption, type ServerOption, withService } from '../service.js';

export function registerDown(topology: Command): void {
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
      async (options: { file: string; json?: boolean; yes?: boolean; volumes?: boolean } & ServerOption) => {
        // Loaded when down runs, not when the CLI starts (see topology-validate.ts).
        const { TopologyInvalidError, validateTopologyFile, baseDirOf } = await import('../../engine/api.js');
        const loaded = await validateTopologyFile(options.file);
        if (!loaded.ok) throw new TopologyInvalidError(loaded.diagnostics);
        const environment = loaded.topology.metadata.name;
        const question = `\nTake environment ${environment} down? Every route and process of it stops.`;
        if (!(await confirmedOrRefused(options.yes, `take environment ${environment} down`, question))) {
          process.stderr.write('Nothing was stopped.\n');
          process.exitCode = 1;
          return;
        }
        const result = await withService(options, (service) =>
          service.down(environment, {
            fallbackBaseDir: baseDirOf(options.file),
            ...(options.volumes ? { volumes: true } : {}),
            log: (line) => {
              if (!options.json) process.stderr.write(`${line}\n`);
            },
          }),
        );
        if (options.json) {
          process.stdout.write(
            `${JSON.stringify({ environment, components: result.components, routes: result.routes }, null, 2)}\n`,
          );
        } else if (result.components.length === 0 && result.routes.length === 0) {
          process.stdout.write(`${environment}: nothing is running\n`);
        } else {
          process.stdout.write(
            `${environment}: stopped ${count(result.components.length, 'component')} and ${count(result.routes.length, 'route')}\n`,
          );
        }
      },
    );
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
