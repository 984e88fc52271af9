/**
 * The CLI's way to its MigrationService: whichever the options and the environment name (a
 * cutover server, Temporal, the state directory), decided by the engine, never here. Loaded when a
 * command runs, not when the CLI starts (plan and validate stay fast).
 */
import type { Command } from 'commander';
import type { MigrationService } from '../engine/services/migration-service.js';
import { type CommandContext, pathIn } from './context.js';
import { resolveStateDir, type StateDirOptions } from './state-dir.js';

export interface ServerOption {
  server?: string;
}

/** Adds `--server URL` to a command. */
export function addServerOption(command: Command): Command {
  return command.option(
    '--server <url>',
    'go through a cutover server instead of the local engine (default: CUTOVER_SERVER; token: CUTOVER_TOKEN)',
  );
}

/** Opens the service (by the context's environment: CUTOVER_SERVER, WORKFLOW_HOST…), lets `use` call it, and closes it. */
export async function withService<T>(
  context: Pick<CommandContext, 'env' | 'cwd'>,
  options: StateDirOptions & ServerOption,
  use: (service: MigrationService) => Promise<T>,
): Promise<T> {
  const { openMigrationService } = await import('../engine/services/migration-service.js');
  const at = {
    ...(options.file === undefined ? {} : { file: pathIn(context, options.file) }),
    ...(options.stateDir === undefined ? {} : { stateDir: pathIn(context, options.stateDir) }),
  };
  const service = await openMigrationService({
    stateDir: resolveStateDir(at, context.env),
    ...(options.server === undefined ? {} : { server: options.server }),
    env: context.env,
    stateDirOption: stateDirOption(options),
  });
  try {
    return await use(service);
  } finally {
    await service.close();
  }
}

/** The options that reach the same state directory again, for messages. */
function stateDirOption(options: StateDirOptions): string {
  if (options.stateDir) return ` --state-dir ${options.stateDir}`;
  return options.file && options.file !== 'topology.yaml' ? ` -f ${options.file}` : '';
}

/** Where a person watches an environment or a migration in a browser, when a server serves it: one line, or nothing. */
export function dashboardLine(service: Pick<MigrationService, 'dashboard'>, id?: string): string {
  if (service.dashboard === undefined) return '';
  return `Dashboard: ${service.dashboard}${id === undefined ? '' : `#/migrations/${id}`}\n`;
}
