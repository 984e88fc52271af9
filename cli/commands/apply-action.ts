import { readFile } from 'node:fs/promises';
import { CutoverError, environmentFault } from '../../core/errors.js';
import { parseSavedPlan, type SavedPlan, topologyDigest } from '../../core/plan/saved-plan.js';
import { baseDirOf, readTopology, validateTopologyText } from '../../engine/api.js';
import { type ServerOption, withService } from '../service.js';
import { migrateTo } from './migrate-action.js';

export interface ApplyOptions extends ServerOption {
  file?: string;
  yes?: boolean;
  detach?: boolean;
  json?: boolean;
  /** `--parallelism N`: how many driver calls run at once. */
  parallelism?: number;
}

/**
 * `cutover topology apply PLAN`: the saved plan's topology, planned again against the live layout
 * and started pinned to the saved plan id and base serial, so exactly the saved plan runs or
 * nothing does (the engine says why). Shown, asked and followed as `migrate` does.
 */
export async function runApply(planFile: string, options: ApplyOptions): Promise<void> {
  const saved = parseSavedPlan(await readPlanFile(planFile), planFile);
  if (options.file !== undefined) await refuseOtherTopology(saved, options.file, planFile);
  const topologyFile = options.file ?? saved.topology.file;
  const desired = { text: saved.topology.text, file: saved.topology.file };
  await withService({ ...options, file: topologyFile }, (service) =>
    migrateTo(
      service,
      {
        // What the saved topology plans to now: when it is not the saved plan, the pinned start
        // below refuses with the reason (stale, drift, or something else).
        plan: async () => (await service.planLive(desired)).plan,
        against: saved.plannedAgainst,
        start: (pin) =>
          service.start({
            ...desired,
            baseDir: baseDirOf(topologyFile),
            planId: saved.plan.planId,
            baseSerial: saved.baseSerial,
            commit: saved.commit,
            attach: pin.attach,
            ...(options.parallelism === undefined ? {} : { parallelism: options.parallelism }),
          }),
      },
      { ...options, planId: saved.plan.planId },
    ),
  );
}

async function readPlanFile(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new CutoverError(
        'USAGE',
        `${file} does not exist: save a plan first with \`cutover topology plan --out ${file}\``,
      );
    }
    throw environmentFault(error, `reading the saved plan ${file}`) ?? error;
  }
}

/** `-f FILE`: the file must be the topology the plan was made of (same normalised model). */
async function refuseOtherTopology(saved: SavedPlan, file: string, planFile: string): Promise<void> {
  const loaded = validateTopologyText(await readTopology(file));
  if (loaded.ok && topologyDigest(loaded.topology) === saved.digest) return;
  const why = loaded.ok ? 'its content differs' : 'it does not load';
  throw new CutoverError(
    'PLAN_MISMATCH',
    `${file} is not the topology ${planFile} was planned from (${why}; saved from ${saved.topology.file}${saved.commit ? ` at ${saved.commit.slice(0, 12)}` : ''}): plan ${file} again with --out and review, or apply without -f`,
  );
}
