/**
 * The engine API that every front end calls (CLI, server, watcher). Front ends parse arguments and
 * render results; deciding what a plan or a migration does happens here and below, never there.
 */
import path from 'node:path';
import { TopologyInvalidError } from '../core/errors.js';
import { type CurrentLayout, emptyLayout } from '../core/layout.js';
import type { ObservedLayout } from '../core/observed.js';
import { buildPlan } from '../core/plan/build-plan.js';
import type { Plan } from '../core/plan/types.js';
import type { Diagnostic } from '../core/topology/diagnostic.js';
import { type LoadResult, loadTopology } from '../core/topology/load-topology.js';
import type { Topology } from '../core/topology/types.js';
import { imageDigestsFor } from './drivers/container-images.js';
import { observeLayout } from './observe/observe-layout.js';
import { planSecrets } from './secrets/resolve-secrets.js';
import { checkReplace } from './services/migration-common.js';
import type { PlanAgainst, PlanOptions, TopologyText, ValidateOutcome } from './services/service-types.js';
import { readFileAtRef } from './sources/read-file-at-ref.js';
import { readTopologyFile } from './sources/read-topology-file.js';
import { readCurrentLayout } from './store/layout-store.js';
import type { StateDir } from './store/state-dir.js';

export { TopologyInvalidError } from '../core/errors.js';
export { checkSecretsFile } from './secrets/secret-source.js';
export { refuseStaleSavedPlan, shortPlanId } from './services/migration-common.js';
export { parseRollbackTarget, type RollbackTarget } from './services/rollback-source.js';
export { commitOfFile } from './sources/file-commit.js';
export type {
  CurrentLayout,
  Diagnostic,
  ObservedLayout,
  Plan,
  PlanAgainst,
  Topology,
  TopologyText,
  ValidateOutcome,
};
export { observeLayout };

export async function validateTopologyFile(file: string): Promise<LoadResult> {
  return loadTopology(await readTopologyFile(file), { file });
}

async function loadOrThrow(text: string, file: string): Promise<Topology> {
  const result = loadTopology(text, { file });
  if (!result.ok) throw new TopologyInvalidError(result.diagnostics);
  return result.topology;
}

/** What to plan against: the recorded layout (default), another file, or the file at a Git revision. */
export type PlanBase =
  | { kind: 'recorded' }
  | { kind: 'file'; file: string }
  | { kind: 'git-ref'; ref: string };

/** Validates a topology given as text: the model, or every located problem (never throws). */
export function validateTopologyText(source: TopologyText): LoadResult {
  return loadTopology(source.text, { file: source.file });
}

/** What `validate` reports, whichever engine answers: the environment and its counts, or every problem. */
export function validationOf(source: TopologyText): ValidateOutcome {
  const result = validateTopologyText(source);
  if (!result.ok) return result;
  const t = result.topology;
  return {
    ok: true,
    environment: t.metadata.name,
    components: Object.keys(t.components).length,
    routes: Object.keys(t.routes).length,
  };
}

/** A topology file's text, named by its path (read on this machine, whichever engine gets it). */
export async function readTopology(file: string, name = file): Promise<TopologyText> {
  return { text: await readTopologyFile(file, undefined, name), file: name };
}

/**
 * What `cutover topology plan --against…` plans against, read on this machine: the recorded
 * layout, another file, or the same file at a Git revision (nothing live when it did not exist).
 */
export async function readPlanBase(file: string, against: PlanBase): Promise<PlanAgainst> {
  switch (against.kind) {
    case 'recorded':
      return against;
    case 'file':
      return { kind: 'text', source: await readTopology(against.file) };
    case 'git-ref': {
      const text = await readFileAtRef(file, against.ref);
      return text === null
        ? { kind: 'empty' }
        : { kind: 'text', source: { text, file: `${file}@${against.ref}` } };
    }
  }
}

/** Where the relative paths of a topology file resolve: its directory. */
export function baseDirOf(file: string): string {
  return path.dirname(path.resolve(file));
}

/**
 * Plans a topology given as text against the recorded layout in a state directory, or another text.
 * Against a state directory it observes what runs first (unless `refresh: false`), so drift is
 * planned and repaired; against a layout kept elsewhere (Temporal), through its `observe`; against
 * a text, the record is all.
 */
export async function planTopologyText(
  desired: TopologyText,
  against:
    | { kind: 'recorded'; stateDir: StateDir }
    /** The current layout, from wherever it is kept (a state directory, or Temporal). */
    | {
        kind: 'layout';
        of: (environment: string) => Promise<CurrentLayout>;
        stateDir?: StateDir;
        /** What runs of that layout, observed where the drivers' state is (Temporal's workers). */
        observe?: (layout: CurrentLayout, fallbackBaseDir: string) => Promise<ObservedLayout>;
      }
    | { kind: 'text'; source: TopologyText }
    /** Nothing is live (e.g. the file did not exist at a Git revision). */
    | { kind: 'empty' },
  options: PlanOptions = {},
): Promise<Plan> {
  const model = await loadOrThrow(desired.text, desired.file);
  checkReplace(model, options.replace, desired.file);
  const replace = options.replace === undefined ? {} : { replace: options.replace };
  if (against.kind === 'recorded') {
    const layout = await readCurrentLayout(against.stateDir, model.metadata.name);
    const secrets = await planSecrets(model, against.stateDir, baseDirOf(desired.file));
    const images = await imageDigestsFor(model, baseDirOf(desired.file));
    const known = {
      ...replace,
      ...(secrets === undefined ? {} : { secrets }),
      ...(images === undefined ? {} : { images }),
    };
    if (options.refresh === false) return buildPlan(layout, model, known);
    const observed = await observeEnvironmentLayout(against.stateDir, layout, baseDirOf(desired.file));
    return buildPlan(layout, model, { ...known, observed });
  }
  if (against.kind === 'empty') return buildPlan(emptyLayout(model.metadata.name), model, replace);
  if (against.kind === 'layout') {
    const layout = await against.of(model.metadata.name);
    const secrets = against.stateDir
      ? await planSecrets(model, against.stateDir, baseDirOf(desired.file))
      : undefined;
    const images = await imageDigestsFor(model, baseDirOf(desired.file));
    const known = {
      ...replace,
      ...(secrets === undefined ? {} : { secrets }),
      ...(images === undefined ? {} : { images }),
    };
    if (options.refresh === false || !against.observe) return buildPlan(layout, model, known);
    const observed = await against.observe(layout, baseDirOf(desired.file));
    return buildPlan(layout, model, { ...known, observed });
  }
  const base = await loadOrThrow(against.source.text, against.source.file);
  return buildPlan({ environment: base.metadata.name, serial: 0, topology: base }, model, replace);
}

export {
  defaultHealIntervalMs,
  defaultMaxRepairsPerHour,
  describeHealEvent,
  type HealEvent,
  type HealTarget,
  SelfHeal,
} from './heal/self-heal.js';

/**
 * What runs now of an environment's recorded layout in a state directory, as the built-in drivers
 * see it. Relative paths resolve where the layout's migration ran, else beside the state directory.
 */
export async function observeEnvironment(stateDir: StateDir, environment: string): Promise<ObservedLayout> {
  const layout = await readCurrentLayout(stateDir, environment);
  return observeEnvironmentLayout(stateDir, layout, path.dirname(stateDir.root));
}

/** `observeEnvironment` of a layout already read; `fallbackBaseDir` where it records no directory. */
export async function observeEnvironmentLayout(
  stateDir: StateDir,
  layout: CurrentLayout,
  fallbackBaseDir: string,
): Promise<ObservedLayout> {
  const { defaultDrivers } = await import('./drivers/default-drivers.js');
  return observeLayout(stateDir, layout, { drivers: defaultDrivers(), fallbackBaseDir });
}
