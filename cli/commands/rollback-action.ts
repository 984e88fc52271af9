import { TopologyInvalidError } from '../../core/errors.js';
import { baseDirOf, parseRollbackTarget, rollbackSource, validateTopologyFile } from '../../engine/api.js';
import { type ServerOption, withService } from '../service.js';
import { type MigrateOptions, migrateTo } from './migrate-action.js';

export interface RollbackOptions extends Omit<MigrateOptions, 'file'>, ServerOption {
  to: string;
  file: string;
  stateDir?: string;
  environment?: string;
}

/** `cutover topology rollback`, loaded only when that command runs (it pulls in the whole engine). */
export async function runRollback(options: RollbackOptions): Promise<void> {
  const to = parseRollbackTarget(options.to);
  const environment = options.environment ?? (await environmentOf(options.file));
  await withService(options, async (service) => {
    const source = await rollbackSource(service, environment, to, baseDirOf(options.file));
    const { target, current } = source;
    if (!options.json) {
      const by = target.migrationId === undefined ? '' : ` by ${target.migrationId}`;
      const at = target.committedAt === undefined ? '' : ` at ${target.committedAt}`;
      process.stderr.write(
        `Rolling ${environment} back from serial ${current.serial} to the layout of serial ${target.serial} (committed${by}${at}), as a new migration:\n\n`,
      );
    }
    await migrateTo(
      service,
      source.request,
      options,
      (env) => `Roll environment ${env} back to the layout of serial ${target.serial} with this plan?`,
    );
  });
}

/** The environment the topology file names. */
async function environmentOf(file: string): Promise<string> {
  const loaded = await validateTopologyFile(file);
  if (!loaded.ok) throw new TopologyInvalidError(loaded.diagnostics);
  return loaded.topology.metadata.name;
}
