/**
 * A saved plan (`cutover topology plan --out plan.json`, like Terraform's `-out`): a plan computed
 * against the live layout, with everything `cutover topology apply` needs to apply exactly it and
 * nothing else: the desired topology's text (so apply needs no checkout), what it was planned
 * against, and the commit it came from. Pure: reading and writing the file happen elsewhere.
 * Its JSON Schema is schemas/saved-plan.v1.json.
 */
import { CutoverError } from '../errors.js';
import { formatDiagnostic } from '../topology/diagnostic.js';
import { loadTopology } from '../topology/load-topology.js';
import type { Topology } from '../topology/types.js';
import { sha256Digest } from './canonical-json.js';
import { planIdOf, savedPlanSealOf } from './plan-id.js';
import type { PlannedAgainst } from './planned-against.js';
import type { Plan } from './types.js';

export { describePlannedAgainst, type PlannedAgainst } from './planned-against.js';

export const savedPlanKind = 'cutover/SavedPlan';
export const savedPlanFormatVersion = '1';

export interface SavedPlan {
  kind: typeof savedPlanKind;
  formatVersion: typeof savedPlanFormatVersion;
  /** When it was saved (ISO 8601). */
  createdAt: string;
  /** The plan, exactly as `plan --format json` prints it; apply refuses anything else. */
  plan: Plan;
  /** The desired topology's text and the path it was read from (its relative paths resolve beside it). */
  topology: { file: string; text: string };
  /** The digest of the normalised desired topology (the plan's `desiredDigest`). */
  digest: string;
  /** The serial of the live layout it was planned against (the plan's `baseSerial`). */
  baseSerial: number;
  plannedAgainst: Extract<PlannedAgainst, { kind: 'live' }>;
  /** The Git commit the topology came from (`--commit`, or the file's clean HEAD); null when unknown. */
  commit: string | null;
  /**
   * The digest of the fields above that the plan id and `digest` do not cover (savedPlanSealOf):
   * `topology.file` (where the topology's relative paths resolve, so which programs run),
   * `plannedAgainst`, `commit` and `createdAt`. Invariant: a file whose seal does not match is refused.
   */
  seal: string;
}

/** The digest of a normalised topology model: equal models, equal digests (the plan's desiredDigest). */
export function topologyDigest(model: Topology): string {
  // The model's keys are in canonical order by construction (normalize.ts), so plain JSON is canonical.
  return sha256Digest(JSON.stringify(model));
}

export function savedPlanOf(parts: {
  plan: Plan;
  plannedAgainst: Extract<PlannedAgainst, { kind: 'live' }>;
  topology: { file: string; text: string };
  commit: string | null;
  createdAt: string;
}): SavedPlan {
  const saved: Omit<SavedPlan, 'seal'> = {
    kind: savedPlanKind,
    formatVersion: savedPlanFormatVersion,
    createdAt: parts.createdAt,
    plan: parts.plan,
    // Its text and name only: where a reader resolves its relative paths is the reader's to decide.
    topology: { file: parts.topology.file, text: parts.topology.text },
    digest: parts.plan.desiredDigest,
    baseSerial: parts.plan.baseSerial,
    plannedAgainst: parts.plannedAgainst,
    commit: parts.commit,
  };
  return { ...saved, seal: savedPlanSealOf(saved) };
}

/**
 * The largest saved plan read, in bytes: the largest topology (64 MiB) with its plan and room to
 * spare, well under the longest string Node can hold (about 512 MiB), which a larger file would
 * crash on before it could be refused.
 */
export const maxSavedPlanBytes = 256 * 1024 * 1024;

/** PLAN_INVALID for a file over maxSavedPlanBytes, refused by its size before it is read. */
export function savedPlanTooLarge(file: string, bytes: number): CutoverError {
  const mib = (n: number) => `${Math.ceil(n / (1024 * 1024))} MiB`;
  return notASavedPlan(
    file,
    `it is ${mib(bytes)}, and the largest saved plan this cutover reads is ${mib(maxSavedPlanBytes)}`,
    makeOne(file),
  );
}

function notASavedPlan(file: string, what: string, remedy: string): CutoverError {
  return new CutoverError('PLAN_INVALID', `${file} is not a saved plan: ${what}; ${remedy}`);
}

function makeOne(file: string): string {
  return `make one with \`cutover topology plan --out ${savedPlanName(file)}\``;
}

/**
 * The name to suggest for a saved plan in place of `file`: the file itself, unless its name says
 * it holds a rendering (plan.md, plan.txt), which `plan --out` would overwrite with JSON.
 */
function savedPlanName(file: string): string {
  return file.replace(/\.(md|markdown|txt)$/i, '.json');
}

/**
 * Reads a saved plan from its text, or refuses with PLAN_INVALID naming `file` and what is wrong:
 * not JSON, a plan rendering rather than a saved plan, an unknown format version, a missing field,
 * or a part edited after it was saved. Invariant of what it returns: the plan's content hashes to
 * its planId and the topology text loads to the model of its digest, so the file says what apply
 * will run (apply re-plans that text and starts only the saved plan id).
 */
export function parseSavedPlan(text: string, file: string, remedy = makeOne(file)): SavedPlan {
  const invalid = (what: string) => notASavedPlan(file, what, remedy);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    const looks = /^\s*(#|<|cutover plan)/.test(text)
      ? ' (it looks like a plan rendering, which a review shows; apply takes the JSON that `plan --out` saves)'
      : '';
    throw invalid(`not JSON${looks}`);
  }
  if (!isObject(value)) throw invalid('not a JSON object');
  if (value.kind === undefined && typeof value.planId === 'string' && Array.isArray(value.actions)) {
    throw invalid('it is a plan rendering (plan --format json), not a saved plan: save one with --out');
  }
  if (value.kind !== savedPlanKind) throw invalid(`kind is ${shown(value.kind)}, not "${savedPlanKind}"`);
  if (value.formatVersion !== savedPlanFormatVersion) {
    throw invalid(
      `formatVersion ${shown(value.formatVersion)} is unknown (this cutover reads ${savedPlanFormatVersion})`,
    );
  }
  const plan = value.plan;
  if (!isObject(plan) || typeof plan.planId !== 'string' || !Array.isArray(plan.actions)) {
    throw invalid('plan is missing or not a plan');
  }
  if (typeof plan.environment !== 'string' || typeof plan.baseSerial !== 'number') {
    throw invalid('plan.environment or plan.baseSerial is missing');
  }
  if (!Number.isSafeInteger(plan.baseSerial) || plan.baseSerial < 0) {
    throw invalid(`baseSerial must be a whole number of 0 or more, not ${shown(plan.baseSerial)}`);
  }
  const topology = value.topology;
  if (!isObject(topology) || typeof topology.text !== 'string' || typeof topology.file !== 'string') {
    throw invalid('topology.text or topology.file is missing');
  }
  if (typeof value.digest !== 'string' || value.digest !== plan.desiredDigest) {
    throw invalid("digest is missing or is not the plan's desiredDigest");
  }
  if (value.baseSerial !== plan.baseSerial) throw invalid("baseSerial is not the plan's baseSerial");
  const against = value.plannedAgainst;
  if (!isObject(against) || against.kind !== 'live' || against.serial !== plan.baseSerial) {
    throw invalid('plannedAgainst is missing or names another serial than the plan');
  }
  if (value.commit !== null && typeof value.commit !== 'string')
    throw invalid('commit must be a string or null');
  if (typeof value.createdAt !== 'string') throw invalid('createdAt is missing');
  if (typeof value.seal !== 'string') {
    throw invalid('seal is missing (it was saved by an older cutover, or edited)');
  }
  const saved = value as unknown as SavedPlan;
  const edited = editedPart(saved);
  if (edited !== null) throw invalid(edited);
  return saved;
}

/**
 * What was edited after the plan was saved, or null: the plan's content against its id, the
 * topology text against the digest, everything else that decides what runs against the seal. Apply runs what the text plans to, pinned to the id, so without
 * this an edited file could show one thing and be refused for a misleading reason, or run another.
 */
function editedPart(saved: SavedPlan): string | null {
  if (planIdOf(saved.plan) !== saved.plan.planId) {
    return `plan was edited after it was saved (its content is not plan ${saved.plan.planId.slice(0, 19)})`;
  }
  const loaded = loadTopology(saved.topology.text, { file: saved.topology.file });
  if (!loaded.ok) {
    const first = loaded.diagnostics[0];
    return `topology.text does not load${first === undefined ? '' : ` (${formatDiagnostic(first)})`}`;
  }
  if (topologyDigest(loaded.topology) !== saved.digest) {
    return `topology.text was edited after the plan was saved (it is not the topology of digest ${saved.digest.slice(0, 19)})`;
  }
  if (savedPlanSealOf(saved) !== saved.seal) {
    return `topology.file, plannedAgainst, commit or createdAt was edited after the plan was saved (they are not those of seal ${saved.seal.slice(0, 19)})`;
  }
  return null;
}

/** A value as a message names it: JSON, cut short, so an absurd one does not flood the line. */
function shown(value: unknown): string {
  const maxShownChars = 24;
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= maxShownChars ? text : `${text.slice(0, maxShownChars - 3)}…`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
