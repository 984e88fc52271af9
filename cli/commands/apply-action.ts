import { open } from 'node:fs/promises';
import { CutoverError, environmentFault } from '../../core/errors.js';
import {
  maxSavedPlanBytes,
  parseSavedPlan,
  type SavedPlan,
  savedPlanTooLarge,
  topologyDigest,
} from '../../core/plan/saved-plan.js';
import {
  appliedCommitOf,
  baseDirOf,
  readTopology,
  refuseStaleSavedPlan,
  validateTopologyText,
} from '../../engine/api.js';
import { type CommandContext, pathIn } from '../context.js';
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
export async function runApply(
  planFile: string,
  options: ApplyOptions,
  context: CommandContext,
): Promise<number> {
  const saved = parseSavedPlan(await readPlanFile(pathIn(context, planFile), planFile), planFile);
  const mismatch =
    options.file === undefined ? null : await otherTopology(saved, options.file, planFile, context);
  const topologyFile = options.file ?? saved.topology.file;
  const topologyPath = pathIn(context, topologyFile);
  const desired = { text: saved.topology.text, file: saved.topology.file, baseDir: baseDirOf(topologyPath) };
  const appliedCommit = await appliedCommitOf(topologyPath, saved.topology.text);
  return withService(context, { ...options, file: topologyFile }, async (service) => {
    if (mismatch !== null) {
      // Stale first: when the live layout moved, that is why the file moved on too (another change
      // merged first), and the reason a reviewer needs.
      refuseStaleSavedPlan(saved, (await service.planLive(desired)).against);
      throw mismatch;
    }
    return migrateTo(
      service,
      {
        // What the saved topology plans to now: when it is not the saved plan, the pinned start
        // below refuses with the reason (stale, drift, or something else).
        plan: async () => (await service.planLive(desired)).plan,
        against: saved.plannedAgainst,
        start: (pin) =>
          service.start({
            ...desired,
            planId: saved.plan.planId,
            baseSerial: saved.baseSerial,
            commit: saved.commit,
            commitFrom: 'saved_plan',
            appliedCommit,
            attach: pin.attach,
            ...(options.parallelism === undefined ? {} : { parallelism: options.parallelism }),
          }),
      },
      { ...options, planId: saved.plan.planId },
      context,
    );
  });
}

/** `name`: the file as the user named it, in messages. */
async function readPlanFile(file: string, name: string): Promise<string> {
  try {
    const handle = await open(file, 'r');
    try {
      const { size } = await handle.stat();
      if (size > maxSavedPlanBytes) throw savedPlanTooLarge(name, size);
      return await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (error) {
    if (error instanceof CutoverError) throw error;
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new CutoverError(
        'USAGE',
        `${name} does not exist: save a plan first with \`cutover topology plan --out ${name}\``,
      );
    }
    throw environmentFault(error, `reading the saved plan ${name}`) ?? error;
  }
}

/** `-f FILE`: null when the file is the topology the plan was made of (same normalised model). */
async function otherTopology(
  saved: SavedPlan,
  file: string,
  planFile: string,
  context: CommandContext,
): Promise<CutoverError | null> {
  const loaded = validateTopologyText(await readTopology(pathIn(context, file), file));
  if (loaded.ok && topologyDigest(loaded.topology) === saved.digest) return null;
  const why = loaded.ok ? 'its content differs' : 'it does not load';
  return new CutoverError(
    'PLAN_MISMATCH',
    `${file} is not the topology ${planFile} was planned from (${why}; saved from ${saved.topology.file}${saved.commit ? ` at ${saved.commit.slice(0, 12)}` : ''}): plan ${file} again with --out and review the new plan, then apply it with the same -f (it is what checks that the reviewed plan is of this file)`,
  );
}
