import { createRequire } from 'node:module';
import type { ComponentReuse, ComponentsRead } from './component-reuse.js';
import type { PathProblem } from './diagnostic.js';
import { parseFastYaml } from './fast-yaml.js';
import { scalarTypes } from './yaml-scalars.js';

/**
 * YAML text → plain data, fast. Texts in the plain subset that topology files are written in are
 * read by fast-yaml.ts; everything else by js-yaml (an order of magnitude faster than a CST parser).
 * Positions of errors found later are recovered by `locate.ts` only when there are errors to report.
 *
 * The schema is YAML 1.2 core (see yaml-scalars.ts) plus merge keys (`<<: *base`): no timestamps or
 * binary, so `version: 2024-01-01` stays text for the schema to judge rather than becoming a Date.
 */
type JsYaml = typeof import('js-yaml');
type YamlSchema = ReturnType<JsYaml['FAILSAFE_SCHEMA']['extend']>;

/**
 * Cache: js-yaml and the schema built on it, loaded on first use, once per process: files the fast
 * path reads (the common case) never pay for loading it.
 */
let loaded: { jsYaml: JsYaml; schema: YamlSchema } | undefined;

function loadJsYaml(): { jsYaml: JsYaml; schema: YamlSchema } {
  if (!loaded) {
    const lib = createRequire(import.meta.url)('js-yaml') as JsYaml;
    // `types` is exported by js-yaml 4 but missing from its type declarations.
    const merge = (lib as unknown as { types: { merge: InstanceType<JsYaml['Type']> } }).types.merge;
    const implicit = scalarTypes.map(
      (t) => new lib.Type(t.tag, { kind: 'scalar', resolve: t.resolve, construct: t.construct }),
    );
    loaded = { jsYaml: lib, schema: lib.FAILSAFE_SCHEMA.extend({ implicit: [...implicit, merge] }) };
  }
  return loaded;
}

/** js-yaml with the schema above: what every text is read as, and what the fast path is held to. */
export function loadWithJsYaml(text: string): unknown {
  const { jsYaml, schema } = loadJsYaml();
  return jsYaml.load(text, { schema, json: false });
}

export type ParsedYaml =
  /** `read`: with a reuse, what the fast path read of `components` (component-reuse.ts). */
  | { ok: true; value: unknown; read?: ComponentsRead }
  | { ok: false; line: number; column: number; message: string }
  | { ok: false; problem: PathProblem };

export interface ParseLimits {
  /**
   * Aliases are shared in memory, but every consumer (validation, diff, JSON) walks them expanded.
   * The expanded node count is bounded by this many nodes per character of input, with a floor, so
   * a file without aliases always passes and a billion-laughs file fails fast.
   */
  maxExpandedNodesPerChar: number;
  minExpandedNodes: number;
}

export const defaultParseLimits: ParseLimits = { maxExpandedNodesPerChar: 1, minExpandedNodes: 100_000 };

export function parseYaml(
  text: string,
  limits: ParseLimits = defaultParseLimits,
  reuse?: Pick<ComponentReuse, 'lines'>,
): ParsedYaml {
  // Most files are in the plain subset fast-yaml.ts reads, several times faster; it gives the same
  // value as js-yaml, and leaves everything else, errors included, to js-yaml.
  const fast = parseFastYaml(text, reuse);
  const parsed = fast ?? parseWithJsYaml(text);
  if (!('value' in parsed)) return parsed;
  const value = parsed.value;
  const ok: ParsedYaml = fast?.read ? { ok: true, value, read: fast.read } : { ok: true, value };
  // Aliases need anchors: a text without `&` has nothing to expand, and large files usually have none.
  if (!text.includes('&')) return ok;
  const limit = Math.max(limits.minExpandedNodes, Math.ceil(text.length * limits.maxExpandedNodesPerChar));
  const expansion = measureExpansion(value, limit);
  if (expansion !== undefined) return { ok: false, problem: expansion };
  return ok;
}

function parseWithJsYaml(text: string): { value: unknown } | Extract<ParsedYaml, { line: number }> {
  try {
    return { value: loadWithJsYaml(text) };
  } catch (error) {
    if (error instanceof loadJsYaml().jsYaml.YAMLException) {
      const mark = error.mark as { line?: number; column?: number } | undefined;
      // js-yaml reads a text without a final newline as if it had one: an error at the very end
      // would point at a line past the last; keep it on the last line.
      const lines = text.split('\n');
      const last = text.endsWith('\n') ? lines.length - 1 : lines.length;
      let line = (mark?.line ?? 0) + 1;
      let column = (mark?.column ?? 0) + 1;
      if (line > Math.max(1, last)) {
        line = Math.max(1, last);
        column = (lines[line - 1] ?? '').length + 1;
      }
      return {
        ok: false,
        line,
        column,
        message: `YAML syntax: ${error.reason}`,
      };
    }
    // js-yaml can throw plain errors on pathological input (e.g. stack depth); report, never crash.
    return { ok: false, line: 1, column: 1, message: `YAML syntax: ${(error as Error).message}` };
  }
}

/**
 * Walks the value once per distinct object (memoised), computing its expanded size; returns a
 * problem when an alias is recursive or the expanded size passes `limit`.
 */
function measureExpansion(root: unknown, limit: number): PathProblem | undefined {
  const sizes = new Map<object, number>();
  const onPath = new Set<object>();
  type Frame = {
    node: object;
    path: (string | number)[];
    children: [string | number, unknown][];
    next: number;
    size: number;
  };
  if (root === null || typeof root !== 'object') return undefined;
  const stack: Frame[] = [];
  const push = (node: object, path: (string | number)[]) => {
    onPath.add(node);
    const children: [string | number, unknown][] = Array.isArray(node)
      ? node.map((v, i) => [i, v] as [number, unknown])
      : Object.entries(node);
    stack.push({ node, path, children, next: 0, size: 1 });
  };
  push(root, []);
  while (stack.length > 0) {
    const frame = stack[stack.length - 1] as Frame;
    if (frame.next < frame.children.length) {
      const [key, child] = frame.children[frame.next++] as [string | number, unknown];
      if (child === null || typeof child !== 'object') {
        frame.size += 1;
        continue;
      }
      const known = sizes.get(child);
      if (known !== undefined) {
        frame.size += known;
      } else if (onPath.has(child)) {
        return { path: [...frame.path, key], message: 'recursive alias: a node refers to itself' };
      } else {
        push(child, [...frame.path, key]);
        continue;
      }
      if (frame.size > limit) return tooLarge(frame.path, limit);
      continue;
    }
    stack.pop();
    onPath.delete(frame.node);
    sizes.set(frame.node, frame.size);
    if (frame.size > limit) return tooLarge(frame.path, limit);
    const parent = stack[stack.length - 1];
    if (parent) parent.size += frame.size;
  }
  return undefined;
}

function tooLarge(path: (string | number)[], limit: number): PathProblem {
  return {
    path,
    message: `aliases expand to more than ${limit} nodes; refusing a file that grows this much when expanded`,
  };
}
