import type { Command } from 'commander';
import { addServerOption, remoteFor, type ServerOption } from '../remote/client.js';
import { resolveStateDir } from '../state-dir.js';

export function registerDown(topology: Command): void {
  addServerOption(topology.command('down'))
    .description("stop every process and route of the file's environment, and record an empty layout")
    .option(
      '-f, --file <file>',
      'the topology file (names the environment and its state directory)',
      'topology.yaml',
    )
    .option('--json', 'print what was stopped as JSON')
    .addHelpText(
      'after',
      '\nRefused while a migration is in flight (cancel it first).\n\nExample:\n  $ cutover topology down -f examples/web-app/topology.yaml',
    )
    .action(async (options: { file: string; json?: boolean } & ServerOption) => {
      const { TopologyInvalidError } = await import('../../engine/api.js');
      // Loaded when down runs, not when the CLI starts (see topology-validate.ts).
      const { readTopologyFile } = await import('../../engine/sources/read-topology-file.js');
      const { loadTopology } = await import('../../core/topology/load-topology.js');
      const loaded = loadTopology(await readTopologyFile(options.file), { file: options.file });
      if (!loaded.ok) throw new TopologyInvalidError(loaded.diagnostics);
      const environment = loaded.topology.metadata.name;
      const remote = remoteFor(options);
      let result: { components: string[]; routes: string[] };
      if (remote) {
        result = await (await import('../remote/commands.js')).remoteDown(remote, environment);
      } else {
        // Local (the state directory) or Temporal (WORKFLOW_HOST), as every migration command.
        const { openMigrationService } = await import('../../engine/services/migration-service.js');
        const { baseDirOf } = await import('../../engine/services/down.js');
        const service = await openMigrationService(resolveStateDir({ file: options.file }));
        try {
          result = await service.down(environment, {
            fallbackBaseDir: baseDirOf(options.file),
            log: (line) => {
              if (!options.json) process.stderr.write(`${line}\n`);
            },
          });
        } finally {
          await service.close();
        }
      }
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
    });
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
