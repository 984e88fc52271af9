import type { Command } from 'commander';
import { formatDiagnostic } from '../../core/topology/diagnostic.js';
import { type CommandRun, pathIn } from '../context.js';
import { addServerOption, type ServerOption, withService } from '../service.js';

export function registerValidate(topology: Command, run: CommandRun): void {
  addServerOption(
    topology
      .command('validate')
      .description('check a topology file against the schema and its cross-references; report every problem')
      .option('-f, --file <file>', 'the topology file', 'topology.yaml')
      .option('--json', 'print the result as JSON'),
  )
    .addHelpText(
      'after',
      `
Exit codes: 0 valid, 1 invalid or unreadable.

Examples:
  $ cutover topology validate -f examples/web-app/topology.yaml
  $ cutover topology validate --json | jq '.diagnostics[].message'`,
    )
    .action(
      run.action(async (options: { file: string; json?: boolean } & ServerOption) => {
        // Loaded here, not when the CLI starts: the loader (and its schema validator) is large, and most
        // commands (the migration verbs above all) never need it.
        const { readTopology } = await import('../../engine/api.js');
        // Named as the user wrote it (diagnostics repeat the name), read where the command runs.
        const source = await readTopology(pathIn(run, options.file), options.file);
        const result = await withService(run, options, (service) => service.validate(source));
        if (options.json) {
          const body = result.ok
            ? { valid: true, environment: result.environment, diagnostics: [] }
            : { valid: false, diagnostics: result.diagnostics };
          run.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
        } else if (result.ok) {
          const n = result.components;
          const r = result.routes;
          run.stdout.write(
            `${options.file}: valid (environment ${result.environment}, ${n} component${n === 1 ? '' : 's'}, ${r} route${r === 1 ? '' : 's'})\n`,
          );
        } else {
          for (const d of result.diagnostics) run.stderr.write(`${formatDiagnostic(d)}\n`);
          const n = result.diagnostics.length;
          run.stderr.write(`${options.file}: ${n} problem${n === 1 ? '' : 's'}\n`);
        }
        return result.ok ? 0 : 1;
      }),
    );
}
