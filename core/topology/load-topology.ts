import { setOwn } from '../records.js';
import { checkTopology } from './check-topology.js';
import { ComponentReuse, type ComponentsRead } from './component-reuse.js';
import type { Diagnostic, PathProblem } from './diagnostic.js';
import type { TopologyFile } from './file-types.js';
import { locateProblems } from './locate.js';
import { normalizeTopology } from './normalize.js';
import { parseLocatedYaml } from './parse-located-yaml.js';
import { defaultParseLimits, type ParseLimits } from './parse-yaml.js';
import type { Topology } from './types.js';
import { validateAgainstSchema } from './validate-schema.js';

export type LoadResult = { ok: true; topology: Topology } | { ok: false; diagnostics: Diagnostic[] };

export interface LoadOptions {
  /** Name used in diagnostics, e.g. `topology.yaml` or `topology.yaml@main`. */
  file: string;
  /** Larger texts are refused before parsing. */
  maxBytes?: number;
  limits?: ParseLimits;
  /**
   * The components of the topology loaded before through it (the other side of a plan), taken over
   * where this text writes them in the same lines; this load's are kept in it when it succeeds.
   * The result is the same as without it, only faster for nearly equal texts.
   */
  reuse?: ComponentReuse;
}

/** 64 MiB: about 400,000 components written out in full. */
export const defaultMaxTopologyBytes = 64 * 1024 * 1024;

/**
 * YAML text → validated model, or every problem found, each located by file, line and column.
 * Pure (no I/O), and total: whatever the text, it returns one of the two results and never throws.
 */
export function loadTopology(text: string, options: LoadOptions): LoadResult {
  const checked = checkedValue(text, options);
  if (!checked.ok) return checked;
  const topology = normalizeTopology(checked.value, options.reuse);
  options.reuse?.remember(checked.read, checked.value.drivers, topology.components);
  return { ok: true, topology };
}

/** A text and the name of its file, for a plan's two sides. */
export interface NamedText {
  text: string;
  file: string;
}

/**
 * The problems loading a plan's texts reports, without making models: those of `desired`, and when
 * it has none, those of `base` loaded after it through a reuse (as a plan of two texts loads them).
 * What a check run beside the models' making (engine/sources/check-aside.ts) computes.
 */
export function planTextProblems(
  desired: NamedText,
  base?: NamedText,
): { desired: Diagnostic[]; base: Diagnostic[] } {
  const reuse = base === undefined ? undefined : new ComponentReuse();
  const first = checkedValue(desired.text, reuse ? { file: desired.file, reuse } : { file: desired.file });
  if (!first.ok) return { desired: first.diagnostics, base: [] };
  if (base === undefined || reuse === undefined) return { desired: [], base: [] };
  // No models: the reuse then only says which components are written as before (what the checks
  // of the second text use), not what they normalise to.
  reuse.remember(first.read, first.value.drivers, {});
  const second = checkedValue(base.text, { file: base.file, reuse });
  return { desired: [], base: second.ok ? [] : second.diagnostics };
}

/**
 * The model of a text whose checks run elsewhere at the same time (`topologyProblems`, in a worker),
 * or undefined when it cannot be made. Made as `loadTopology` makes it from a text that passes them,
 * and remembered in `reuse` the same way. Only for a caller that uses it, and that reuse, once those
 * checks found nothing: from a text they reject it may give a model, undefined or a remembered
 * reuse, all to be dropped. Never throws.
 */
export function loadUncheckedTopology(text: string, options: LoadOptions): Topology | undefined {
  try {
    if (text.length > (options.maxBytes ?? defaultMaxTopologyBytes)) return undefined;
    const reuse = options.reuse;
    const parsed = parseLocatedYaml(text, options.file, options.limits ?? defaultParseLimits, reuse);
    if (!parsed.ok) return undefined;
    const value = parsed.value as TopologyFile;
    const topology = normalizeTopology(value, reuse);
    reuse?.remember(parsed.read, value.drivers, topology.components);
    return topology;
  } catch {
    return undefined;
  }
}

/** Parse, schema and checks: the file's value when it passes them, else every problem, located. */
function checkedValue(
  text: string,
  options: LoadOptions,
):
  | { ok: true; value: TopologyFile; read: ComponentsRead | undefined }
  | { ok: false; diagnostics: Diagnostic[] } {
  const file = options.file;
  const maxBytes = options.maxBytes ?? defaultMaxTopologyBytes;
  if (text.length > maxBytes) {
    return fail(file, 1, 1, `file is ${text.length} bytes; the limit is ${maxBytes}`);
  }
  const reuse = options.reuse;
  const parsed = parseLocatedYaml(text, file, options.limits ?? defaultParseLimits, reuse);
  if (!parsed.ok) return { ok: false, diagnostics: [parsed.diagnostic] };
  const reused = parsed.read?.reused;
  const problems = schemaProblemsOf(parsed.value, reused);
  // Components taken over passed their own checks before: with the same drivers, they pass again.
  const checked =
    problems.length === 0 &&
    reused !== undefined &&
    reused.size > 0 &&
    reuse?.sameDrivers((parsed.value as TopologyFile).drivers)
      ? reused
      : undefined;
  problems.push(...bestEffortChecks(parsed.value, problems, checked));
  if (problems.length > 0) return { ok: false, diagnostics: locateProblems(file, text, problems) };
  return { ok: true, value: parsed.value as TopologyFile, read: parsed.read };
}

/**
 * The schema's problems with the value. Components taken over from a reuse passed it when first
 * loaded, and the schema judges each component on its own: only the others are validated. When
 * anything fails, the whole is validated again, so the problems are exactly the whole's.
 */
function schemaProblemsOf(value: unknown, reused: ReadonlySet<string> | undefined): PathProblem[] {
  if (reused === undefined || reused.size === 0) return [...validateAgainstSchema(value)];
  const root = value as Record<string, unknown>;
  const components = root.components as Record<string, unknown>;
  const others: Record<string, unknown> = {};
  const names = Object.keys(components);
  for (let i = 0; i < names.length; i++) {
    const name = names[i] as string;
    if (!reused.has(name)) setOwn(others, name, components[name]);
  }
  const problems = validateAgainstSchema({ ...root, components: others });
  return problems.length === 0 ? [] : [...validateAgainstSchema(value)];
}

/**
 * The cross-reference checks assume a schema-valid shape. When the schema already failed they still
 * run, so that one pass reports every problem, but a check tripping over a malformed part is dropped,
 * and so is a problem inside a part the schema already rejected. With `checked` (components that
 * passed their own checks before, on a schema-valid file) only the rest is checked at first; when
 * anything fails, the whole is checked again, so the problems are exactly the whole's.
 */
function bestEffortChecks(
  value: unknown,
  schemaProblems: readonly PathProblem[],
  checked?: ReadonlySet<string>,
): PathProblem[] {
  let found: PathProblem[];
  try {
    found = checkTopology(value as TopologyFile, checked);
    if (checked !== undefined && found.length > 0) found = checkTopology(value as TopologyFile);
  } catch {
    return [];
  }
  if (schemaProblems.length === 0) return found;
  const rejected = schemaProblems.map((p) => p.path.join('\u0000'));
  return found.filter((p) => {
    const path = p.path.join('\u0000');
    return !rejected.some((r) => path.startsWith(r) || r.startsWith(path));
  });
}

function fail(
  file: string,
  line: number,
  column: number,
  message: string,
): { ok: false; diagnostics: Diagnostic[] } {
  return { ok: false, diagnostics: [{ file, line, column, path: '', message }] };
}
