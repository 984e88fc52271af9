/**
 * The engine API that every front end calls (CLI, server, watcher). Front ends parse arguments and
 * render results; deciding what a plan or a migration does happens here and below, never there.
 */
import { TopologyInvalidError } from '../core/errors.js';
import { type CurrentLayout, emptyLayout } from '../core/layout.js';
import { buildPlan } from '../core/plan/build-plan.js';
import type { Plan } from '../core/plan/types.js';
import type { Diagnostic } from '../core/topology/diagnostic.js';
import { type LoadResult, loadTopology } from '../core/topology/load-topology.js';
import type { Topology } from '../core/topology/types.js';
import { readFileAtRef } from './sources/read-file-at-ref.js';
import { readTopologyFile } from './sources/read-topology-file.js';
import { readCurrentLayout } from './store/layout-store.js';
import { stateDirFor } from './store/state-dir.js';

export { TopologyInvalidError } from '../core/errors.js';
export type { CurrentLayout, Diagnostic, Plan, Topology };

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

export interface PlanRequest {
  file: string;
  against: PlanBase;
  env?: NodeJS.ProcessEnv;
  /** Where the recorded layout comes from, when not the state directory (Temporal mode). */
  recordedLayout?: (environment: string) => Promise<CurrentLayout>;
}

export async function planTopologyFile(request: PlanRequest): Promise<Plan> {
  const desired = await loadOrThrow(await readTopologyFile(request.file), request.file);
  const current = await baseLayout(request, desired.metadata.name);
  return buildPlan(current, desired);
}

/** A topology given as text rather than read from a file (the server's requests). */
export interface TopologyText {
  text: string;
  /** The name diagnostics use for it. */
  file: string;
}

/** Validates a topology given as text: the model, or every located problem (never throws). */
export function validateTopologyText(source: TopologyText): LoadResult {
  return loadTopology(source.text, { file: source.file });
}

/** Plans a topology given as text against the recorded layout in a state directory, or another text. */
export async function planTopologyText(
  desired: TopologyText,
  against:
    | { kind: 'recorded'; stateDir: string }
    /** The current layout, from wherever it is kept (a state directory, or Temporal). */
    | { kind: 'layout'; of: (environment: string) => Promise<CurrentLayout> }
    | { kind: 'text'; source: TopologyText }
    /** Nothing is live (e.g. the file did not exist at a Git revision). */
    | { kind: 'empty' },
): Promise<Plan> {
  const model = await loadOrThrow(desired.text, desired.file);
  if (against.kind === 'recorded') {
    return buildPlan(await readCurrentLayout(against.stateDir, model.metadata.name), model);
  }
  if (against.kind === 'empty') return buildPlan(emptyLayout(model.metadata.name), model);
  if (against.kind === 'layout') return buildPlan(await against.of(model.metadata.name), model);
  const base = await loadOrThrow(against.source.text, against.source.file);
  return buildPlan({ environment: base.metadata.name, serial: 0, topology: base }, model);
}

async function baseLayout(request: PlanRequest, environment: string): Promise<CurrentLayout> {
  const against = request.against;
  switch (against.kind) {
    case 'recorded':
      if (request.recordedLayout) return request.recordedLayout(environment);
      return readCurrentLayout(stateDirFor(request.file, request.env), environment);
    case 'file': {
      const topology = await loadOrThrow(await readTopologyFile(against.file), against.file);
      return { environment: topology.metadata.name, serial: 0, topology };
    }
    case 'git-ref': {
      const text = await readFileAtRef(request.file, against.ref);
      if (text === null) return emptyLayout(environment);
      const topology = await loadOrThrow(text, `${request.file}@${against.ref}`);
      return { environment: topology.metadata.name, serial: 0, topology };
    }
  }
}
