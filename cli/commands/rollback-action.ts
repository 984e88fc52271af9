import { TopologyInvalidError } from '../../core/errors.js';
import { baseDirOf, parseRollbackTarget, validateTopologyFile } from '../../engine/api.js';
import type { RollbackPlan } from '../../engine/services/migration-service.js';
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
  const request = { to, fallbackBaseDir: baseDirOf(options.file) };
  await withService(options, async (service) => {
    let serial = 0;
    await migrateTo(
      service,
      {
        plan: async () => {
          const rollback = await service.planRollback(environment, request);
          serial = rollback.target.serial;
          if (!options.json) process.stderr.write(heading(environment, rollback));
          return rollback.plan;
        },
        start: (pin) => service.startRollback(environment, { ...request, ...pin }),
      },
      options,
      (env) => `Roll environment ${env} back to the layout of serial ${serial} with this plan?`,
    );
  });
}

function heading(environment: string, { target, currentSerial }: RollbackPlan): string {
  const by = target.migrationId === undefined ? '' : ` by ${target.migrationId}`;
  const at = target.committedAt === undefined ? '' : ` at ${target.committedAt}`;
  return `Rolling ${environment} back from serial ${currentSerial} to the layout of serial ${target.serial} (committed${by}${at}), as a new migration:\n\n`;
}

/** The environment the topology file names. */
async function environmentOf(file: string): Promise<string> {
  const loaded = await validateTopologyFile(file);
  if (!loaded.ok) throw new TopologyInvalidError(loaded.diagnostics);
  return loaded.topology.metadata.name;
}
