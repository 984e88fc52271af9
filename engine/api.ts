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
import { ComponentReuse } from '../core/topology/component-reuse.js';
import type { Diagnostic } from '../core/topology/diagnostic.js';
import { type LoadResult, loadTopology, loadUncheckedTopology } from '../core/topology/load-topology.js';
import type { Topology } from '../core/topology/types.js';
import { observeEnvironmentLayout } from './observe/observe-environment.js';
import { observeLayout } from './observe/observe-layout.js';
import type { ProcessSecrets } from './secrets/secret-source.js';
import { checkReplace } from './services/migration-common.js';
import type { MigrationHome } from './services/prepare-migration.js';
import type {
  PlanAgainst,
  PlanOptions,
  TopologySource,
  TopologyText,
  ValidateOutcome,
} from './services/service-types.js';
import { checkAside } from './sources/check-aside.js';
import { routeCertificateProblems } from './sources/check-route-certificates.js';
import { readFileAtRef } from './sources/read-file-at-ref.js';
import { readTopologyFile } from './sources/read-topology-file.js';
import { baseDirOf } from './sources/topology-source.js';
import { readCurrentLayout } from './store/layout-store.js';
import type { StateDir } from './store/state-dir.js';

export { TopologyInvalidError } from '../core/errors.js';
export { packageRoot } from '../platform/package-path.js';
export { processRedactor } from './redact/process-redactor.js';
export { checkSecretsFile, type ProcessSecrets, processSecrets } from './secrets/secret-source.js';
export { refuseStaleSavedPlan, shortPlanId } from './services/migration-common.js';
export { parseRollbackTarget, type RollbackTarget } from './services/rollback-source.js';
export { appliedCommitOf, commitOfFile } from './sources/file-commit.js';
export { baseDirOf, topologySource } from './sources/topology-source.js';
export type {
  CurrentLayout,
  Diagnostic,
  ObservedLayout,
  Plan,
  PlanAgainst,
  Topology,
  TopologySource,
  TopologyText,
  ValidateOutcome,
};
export { observeEnvironmentLayout, observeLayout };

export async function validateTopologyFile(file: string): Promise<LoadResult> {
  return loadTopology(await readTopologyFile(file), { file });
}

async function loadOrThrow(text: string, file: string, reuse?: ComponentReuse): Promise<Topology> {
  const result = loadTopology(text, reuse ? { file, reuse } : { file });
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

/**
 * What `validate` reports, whichever engine answers: the environment and its counts, or every
 * problem. A topology read on this machine (with its `baseDir`) has its TLS routes' certificate
 * files checked too; a text sent to a server, whose files are not there, does not.
 */
export async function validationOf(source: TopologyText | TopologySource): Promise<ValidateOutcome> {
  const result = validateTopologyText(source);
  if (!result.ok) return result;
  const t = result.topology;
  if ('baseDir' in source) {
    const diagnostics = await routeCertificateProblems(t, source);
    if (diagnostics.length > 0) return { ok: false, diagnostics };
  }
  return {
    ok: true,
    environment: t.metadata.name,
    components: Object.keys(t.components).length,
    routes: Object.keys(t.routes).length,
  };
}

/**
 * A topology file's text, named as the user wrote it (`name`; read on this machine, whichever
 * engine gets it), its relative paths resolving beside the file read (`file`: give it absolute
 * when the caller's directory is not this process's).
 */
export async function readTopology(file: string, name = file): Promise<TopologySource> {
  return { text: await readTopologyFile(file, undefined, name), file: name, baseDir: baseDirOf(file) };
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

/**
 * Plans a topology against the recorded layout in a state directory, a layout kept elsewhere, or
 * another text. Against a recorded layout it observes what runs first (unless `refresh: false`),
 * so drift is planned and repaired, exactly as a migration started from it plans
 * (`prepareMigration`); against a text, the record is all.
 */
export async function planTopologyText(
  desired: TopologySource,
  against: /** `secrets`: this process's, hashed with the state directory's key (a changed secret is seen). */
    | { kind: 'recorded'; stateDir: StateDir; secrets: ProcessSecrets }
    /** The current layout, from wherever it is kept (Temporal). */
    | { kind: 'layout'; home: MigrationHome }
    | { kind: 'text'; source: TopologyText }
    /** Nothing is live (e.g. the file did not exist at a Git revision). */
    | { kind: 'empty' },
  options: PlanOptions = {},
): Promise<Plan> {
  if (against.kind === 'recorded' || against.kind === 'layout') {
    // Loaded here: a plan between two texts (plan --against, a pull request's review) needs neither
    // the state directory's migrations nor the drivers they bring, and starts sooner without them.
    const [{ localHome }, { prepareMigration }] = await Promise.all([
      import('./services/local-home.js'),
      import('./services/prepare-migration.js'),
    ]);
    const home = against.kind === 'recorded' ? localHome(against.stateDir, against.secrets) : against.home;
    const request = {
      source: desired,
      ...(options.replace === undefined ? {} : { replace: options.replace }),
      ...(options.refresh === undefined ? {} : { refresh: options.refresh }),
    };
    return (await prepareMigration(request, home)).plan;
  }
  // Large texts are checked on another thread while this one makes their models and plans.
  const other = against.kind === 'text' ? against.source : undefined;
  const aside = checkAside(
    { text: desired.text, file: desired.file },
    other && { text: other.text, file: other.file },
  );
  if (aside === undefined) return planTexts(desired, against, options);
  let plan: Plan | undefined;
  let replaceError: unknown;
  let failure: unknown;
  try {
    const reuse = reuseFor(against);
    const unchecked = (text: string, file: string) =>
      loadUncheckedTopology(text, reuse ? { file, reuse } : { file });
    const model = unchecked(desired.text, desired.file);
    if (model !== undefined) {
      try {
        checkReplace(model, options.replace, desired.file);
      } catch (error) {
        replaceError = error;
      }
      const base = other === undefined ? null : unchecked(other.text, other.file);
      if (replaceError === undefined && base !== undefined) plan = planAgainst(model, base, options);
    }
  } catch (error) {
    failure = error;
  }
  // In the order a load and check of each in turn reports them: the desired text's problems, then
  // --replace's, then the other text's.
  const problems = await aside;
  if (problems.desired.length > 0) throw new TopologyInvalidError(problems.desired);
  if (replaceError !== undefined) throw replaceError;
  if (problems.base.length > 0) throw new TopologyInvalidError(problems.base);
  if (failure !== undefined) throw failure;
  return plan ?? planTexts(desired, against, options);
}

type TextBase = { kind: 'text'; source: TopologyText } | { kind: 'empty' };

/** The plan of a text against another, or against nothing. */
async function planTexts(desired: TopologySource, against: TextBase, options: PlanOptions): Promise<Plan> {
  const reuse = reuseFor(against);
  const model = await loadOrThrow(desired.text, desired.file, reuse);
  return planModel(model, reuse, desired, against, options);
}

/**
 * The two texts are usually two versions of one file: the second load takes over the components
 * the first read in the same lines (component-reuse.ts).
 */
function reuseFor(against: TextBase): ComponentReuse | undefined {
  return against.kind === 'text' ? new ComponentReuse() : undefined;
}

/** The plan of the desired text's model (loaded through `reuse`) against the other text, or nothing. */
async function planModel(
  model: Topology,
  reuse: ComponentReuse | undefined,
  desired: TopologySource,
  against: TextBase,
  options: PlanOptions,
): Promise<Plan> {
  checkReplace(model, options.replace, desired.file);
  const base =
    against.kind === 'empty' ? null : await loadOrThrow(against.source.text, against.source.file, reuse);
  return planAgainst(model, base, options);
}

/** `base`: the other text's model, or null for nothing. */
function planAgainst(model: Topology, base: Topology | null, options: PlanOptions): Plan {
  const replace = options.replace === undefined ? {} : { replace: options.replace };
  if (base === null) return buildPlan(emptyLayout(model.metadata.name), model, replace);
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
