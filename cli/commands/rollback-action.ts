import { TopologyInvalidError } from '../../core/errors.js';
import { baseDirOf, parseRollbackTarget, readTopology, validateTopologyText } from '../../engine/api.js';
import type { RollbackPlan } from '../../engine/services/migration-service.js';
import { type CommandContext, pathIn } from '../context.js';
import { type ServerOption, withService } from '../service.js';
import { type MigrateOptions, migrateTo } from './migrate-action.js';

export interface RollbackOptions extends Omit<MigrateOptions, 'file'>, ServerOption {
  to: string;
  file: string;
  stateDir?: string;
  environment?: string;
}

/** `cutover topology rollback`, loaded only when that command runs (it pulls in the whole engine). */
export async function runRollback(options: RollbackOptions, context: CommandContext): Promise<number> {
  const to = parseRollbackTarget(options.to);
  const file = pathIn(context, options.file);
  const environment = options.environment ?? (await environmentOf(file, options.file));
  const request = { to, fallbackBaseDir: baseDirOf(file) };
  return withService(context, options, async (service) => {
    let serial = 0;
    return migrateTo(
      service,
      {
        plan: async () => {
          const rollback = await service.planRollback(environment, request);
          serial = rollback.target.serial;
          if (!options.json) context.stderr.write(heading(environment, rollback));
          return rollback.plan;
        },
        start: (pin) => service.startRollback(environment, { ...request, ...pin }),
      },
      options,
      context,
      (env) => `Roll environment ${env} back to the layout of serial ${serial} with this plan?`,
    );
  });
}

function heading(environment: string, { target, currentSerial }: RollbackPlan): string {
  const by = target.migrationId === undefined ? '' : ` by ${target.migrationId}`;
  const at = target.committedAt === undefined ? '' : ` at ${target.committedAt}`;
  return `Rolling ${environment} back from serial ${currentSerial} to the layout of serial ${target.serial} (committed${by}${at}), as a new migration:\n\n`;
}

/** The environment the topology file names; `name`: the file as the user named it. */
async function environmentOf(file: string, name: string): Promise<string> {
  const loaded = validateTopologyText(await readTopology(file, name));
  if (!loaded.ok) throw new TopologyInvalidError(loaded.diagnostics);
  return loaded.topology.metadata.name;
}
