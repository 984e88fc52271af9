/**
 * replicate for a stateful container component: green gets a copy of blue's state, by a one-off
 * helper container of green's image (so it works alike with podman and docker, local or remote:
 * no host path, no `volume export`, which docker lacks).
 *
 * - No `replicate.command`: each named volume of the component is copied from blue's slot into
 *   green's (`cp -a`, so modes, owners and timestamps stay), both mounted in the helper. The image
 *   must have `sh` and `cp` (busybox is enough). A copy is of the files as they are while blue
 *   runs, as with the process driver's dataDir: a database wants its own command.
 * - `replicate.command`: run in a container of green's image, on the component's network, with
 *   green's volumes at their own paths, blue's read-only under `/cutover/from<path>`, the
 *   component's env and CUTOVER_FROM_SLOT_ID / CUTOVER_SLOT_ID / CUTOVER_VERSION. Exit 0 is done;
 *   75 (EX_TEMPFAIL) is retried; anything else fails the stage, quoting the last lines of output.
 *
 * The helper is named `cutover-<env>-<component>-<green slot id>-replicate` and labelled as the
 * slot is, so an earlier attempt's leftover is removed first and `topology down` finds it too.
 */
import { formatDuration } from '../../core/topology/duration.js';
import { defaults } from '../../core/topology/types.js';
import { componentEnv } from './component-env.js';
import { type Engine, lastLine, runEngine } from './container-engine.js';
import { containerName, containerSlotId, engineFor, labels, volumeName } from './container-names.js';
import { exitCodeRetry } from './exec-driver.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from './types.js';

/** Where blue's volumes are mounted (read-only) in the helper container. */
export const replicateFromDir = '/cutover/from';
/** Lines of the helper's output quoted when it fails. */
const outputTailLines = 10;

interface NamedVolume {
  /** The name in the topology (`data` of `data:/data`). */
  name: string;
  target: string;
}

/** The component's named volumes (not host paths), as `volumes` lists them. */
export function namedVolumes(volumes: readonly string[] = []): NamedVolume[] {
  return volumes.flatMap((spec) => {
    const [source = '', target = ''] = spec.split(':');
    return source.startsWith('/') || source.startsWith('.') ? [] : [{ name: source, target }];
  });
}

export async function replicateContainerSlot(
  ctx: ComponentCallContext,
  from: SlotInfo,
  to: SlotInfo,
  options: DriverCallOptions,
): Promise<void> {
  options.signal.throwIfAborted();
  const replicate = ctx.spec.replicate;
  if (replicate?.dataDir !== undefined) {
    throw new PermanentDriverError(
      `component ${ctx.component}: replicate.dataDir is for the process driver; a container component's named volumes are copied without it (remove replicate.dataDir), or set replicate.command`,
    );
  }
  const { engine, hostName } = engineFor(ctx, to);
  const blueHost = engineFor(ctx, from).hostName;
  if (blueHost !== hostName) {
    throw new PermanentDriverError(
      `component ${ctx.component}: blue runs on host ${blueHost} and green on host ${hostName}: replicate mounts both slots' volumes in one container, on one host; keep the component's placement for this migration and move it in a later one, or copy the data by hand`,
    );
  }
  const fromId = containerSlotId(ctx, from);
  const toId = containerSlotId(ctx, to);
  const image = imageOf(to) ?? ctx.spec.image;
  if (!image)
    throw new PermanentDriverError(`component ${ctx.component}: green has no image to replicate with`);
  const volumes = namedVolumes(ctx.spec.volumes);
  const helper = { engine, name: containerName(ctx, toId, 0).replace(/-0$/, '-replicate'), image };

  if (replicate?.command) {
    const mounts = volumes.flatMap((v) => [
      '-v',
      `${volumeName(ctx, toId, v.name)}:${v.target}`,
      '-v',
      `${volumeName(ctx, fromId, v.name)}:${replicateFromDir}${v.target}:ro`,
    ]);
    const network = ctx.spec.network ?? (ctx.driver.type === 'container' ? ctx.driver.network : undefined);
    const env = {
      ...componentEnv(ctx),
      CUTOVER_ENVIRONMENT: ctx.environment,
      CUTOVER_COMPONENT: ctx.component,
      CUTOVER_VERSION: to.version,
      CUTOVER_FROM_SLOT_ID: fromId,
      CUTOVER_SLOT_ID: toId,
    };
    const what = `replicate command ${replicate.command.join(' ')}`;
    options.log(`${ctx.component}: running ${what} in ${helper.name}`);
    await runHelper(ctx, helper, {
      args: [...(network === undefined ? [] : ['--network', network]), ...mounts],
      env,
      command: replicate.command,
      what,
      options,
    });
    return;
  }

  if (volumes.length === 0) {
    options.log(`${ctx.component}: no named volumes and no replicate command; nothing to copy`);
    return;
  }
  for (const v of volumes) {
    const source = volumeName(ctx, fromId, v.name);
    const target = volumeName(ctx, toId, v.name);
    const exists = await runEngine(engine, ['volume', 'inspect', source], { signal: options.signal });
    if (exists.code !== 0) {
      options.log(`${ctx.component}: blue has no volume ${source} (nothing written there); nothing to copy`);
      continue;
    }
    await runHelper(ctx, helper, {
      args: ['--network', 'none', '-v', `${source}:/from:ro`, '-v', `${target}:/to`, '--entrypoint', 'sh'],
      env: {},
      command: ['-c', 'cp -a /from/. /to/'],
      what: `copy of volume ${source} into ${target} (sh and cp of image ${image})`,
      options,
    });
    options.log(`${ctx.component}: copied volume ${source} into ${target}`);
  }
}

function imageOf(slot: SlotInfo): string | undefined {
  const id = slot.details?.imageId;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

interface HelperRun {
  args: string[];
  env: Record<string, string>;
  command: string[];
  what: string;
  options: DriverCallOptions;
}

/**
 * `run --rm` of the helper, attached, bounded by replicate.timeout; whatever happens it is removed
 * (a timed-out or aborted call leaves the container running without its CLI).
 */
async function runHelper(
  ctx: ComponentCallContext,
  helper: { engine: Engine; name: string; image: string },
  run: HelperRun,
): Promise<void> {
  const { engine, name } = helper;
  const timeoutMs = ctx.spec.replicate?.timeout ?? defaults.replicateTimeoutMs;
  const remove = () =>
    runEngine(engine, ['rm', '-f', name], { signal: new AbortController().signal }).catch(() => undefined);
  await remove();
  const slotLabels = [
    `${labels.environment}=${ctx.environment}`,
    `${labels.component}=${ctx.component}`,
    `${labels.migration}=${ctx.migrationId}`,
  ].flatMap((l) => ['--label', l]);
  // Values reach the container as `--env KEY` from the engine's environment, never on its command line.
  const envArgs = Object.keys(run.env).flatMap((key) => ['--env', key]);
  const args = ['run', '--rm', '--name', name, ...engine.runArgs, ...slotLabels, ...envArgs, ...run.args];
  if (ctx.spec.user !== undefined) args.push('--user', ctx.spec.user);
  args.push(helper.image, ...run.command);
  let result: Awaited<ReturnType<typeof runEngine>>;
  try {
    result = await runEngine(engine, args, { signal: run.options.signal, timeoutMs, env: run.env });
  } catch (error) {
    await remove();
    if (error instanceof Error && / did not answer within /.test(error.message)) {
      throw new Error(`component ${ctx.component}: ${run.what} timed out after ${formatDuration(timeoutMs)}`);
    }
    throw error;
  }
  if (result.code === 0) return;
  await remove();
  const output = `${result.stdout}${result.stderr}`.split('\n').filter((l) => l.trim() !== '');
  const tail =
    output.length > 0
      ? `; last lines of its output:\n${output.slice(-outputTailLines).join('\n')}`
      : '; no output';
  if (result.code === exitCodeRetry) {
    throw new Error(
      `component ${ctx.component}: ${run.what} exited with code ${exitCodeRetry} (EX_TEMPFAIL: will retry)${tail}`,
    );
  }
  // 125–127: the engine could not create or start it (no such image, no sh, a bad mount).
  const how =
    result.code >= 125 && result.code <= 127
      ? `could not start (${lastLine(result.stderr)})`
      : `exited with code ${result.code}`;
  throw new PermanentDriverError(`component ${ctx.component}: ${run.what} ${how}${tail}`);
}
