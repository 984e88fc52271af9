import { createRequire } from 'node:module';
import type { Node } from 'yaml';
import type { Diagnostic, PathProblem } from './diagnostic.js';
import { compareDiagnostics, dottedPath } from './diagnostic.js';

/**
 * Turns path problems into located diagnostics. Runs only when there is something to report: it
 * builds a full YAML syntax tree (slow on large files), which the happy path never needs.
 */
export function locateProblems(file: string, text: string, problems: readonly PathProblem[]): Diagnostic[] {
  const { yaml, doc, lineCounter } = positionTree(text);
  const index = new WeakMap<object, Map<string, unknown>>();
  const out = problems.map((problem) => {
    const { offset, node } = findNode(yaml, doc.contents as Node | null, problem, index);
    const pos = lineCounter.linePos(offset);
    const written = problem.withSource && plainSource(yaml, node, text);
    return {
      file,
      line: pos.line,
      column: pos.col,
      path: dottedPath(problem.path),
      message: written && problem.withSource ? problem.withSource(written) : problem.message,
    };
  });
  return out.sort(compareDiagnostics);
}

/**
 * A duplicate key (which the YAML parser reports by position only) as a diagnostic with its path and
 * the line of the key's first occurrence; null when no key starts at that position.
 */
export function locateDuplicateKey(
  file: string,
  text: string,
  line: number,
  column: number,
): Diagnostic | null {
  const { yaml, doc, lineCounter } = positionTree(text);
  const { isMap, isPair, isScalar, isSeq } = yaml;
  const lines = text.split('\n');
  let offset = column - 1;
  for (let i = 0; i < line - 1; i++) offset += (lines[i]?.length ?? 0) + 1;
  const search = (node: unknown, path: (string | number)[]): Diagnostic | null => {
    if (isMap(node)) {
      const seen = new Map<string, number>();
      for (const pair of node.items) {
        if (!isPair(pair) || !isScalar(pair.key)) continue;
        const key = String(pair.key.value);
        const start = rangeStart(pair.key as Node) ?? -1;
        const first = seen.get(key);
        if (start === offset && first !== undefined)
          return {
            file,
            line,
            column,
            path: dottedPath([...path, key]),
            message: `duplicate key ${JSON.stringify(key)}: the first is on line ${lineCounter.linePos(first).line}`,
          };
        if (first === undefined) seen.set(key, start);
        const found = search(pair.value, [...path, key]);
        if (found) return found;
      }
    } else if (isSeq(node)) {
      for (let i = 0; i < node.items.length; i++) {
        const found = search(node.items[i], [...path, i]);
        if (found) return found;
      }
    }
    return null;
  };
  return search(doc.contents, []);
}

/** The source text of a plain (unquoted) scalar node; null for anything else. */
function plainSource({ isScalar }: YamlModule, node: unknown, text: string): string | null {
  if (!isScalar(node) || node.type !== 'PLAIN') return null;
  const range = (node as { range?: [number, number, number] }).range;
  return range ? text.slice(range[0], range[1]) : null;
}

type YamlModule = typeof import('yaml');
/** Cache: the yaml module, loaded on first use (see positionTree), once per process. */
let yamlModule: YamlModule | undefined;

/** The file's YAML syntax tree, for positions only, and the module that reads it. */
function positionTree(text: string) {
  // Loaded on first use: valid files (the common case, and every CLI start) never pay for it.
  yamlModule ??= createRequire(import.meta.url)('yaml') as YamlModule;
  const yaml = yamlModule;
  const lineCounter = new yaml.LineCounter();
  // Its own limits must never hide our diagnostics: duplicate keys, aliases and all are let through.
  const doc = yaml.parseDocument(text, { lineCounter, uniqueKeys: false, merge: true, prettyErrors: false });
  return { yaml, doc, lineCounter };
}

/**
 * Offset of the deepest node on the path (the key itself for `atKey` problems), and that node when
 * the whole path was found.
 */
function findNode(
  { isMap, isPair, isSeq, isScalar }: YamlModule,
  root: Node | null,
  problem: PathProblem,
  index: WeakMap<object, Map<string, unknown>>,
): { offset: number; node: unknown } {
  let node: unknown = root;
  let offset = rangeStart(root) ?? 0;
  // Where a path ends in a missing key (a required field), point at the key of its parent entry.
  let keyOffset = offset;
  const last = problem.path.length - 1;
  for (let i = 0; i <= last; i++) {
    const seg = problem.path[i];
    if (isMap(node)) {
      // Each map is indexed once, by key text (the first of duplicate keys wins, as in a scan):
      // a file with many problems in one large map stays linear, not quadratic.
      let byKey = index.get(node);
      if (!byKey) {
        byKey = new Map();
        for (const p of node.items) {
          if (isPair(p) && isScalar(p.key)) {
            const key = String(p.key.value);
            if (!byKey.has(key)) byKey.set(key, p);
          }
        }
        index.set(node, byKey);
      }
      const pair = byKey.get(String(seg)) as { key: unknown; value: unknown } | undefined;
      if (!pair) return { offset: keyOffset, node: null };
      const keyStart = rangeStart(pair.key as Node);
      if (i === last && problem.atKey && keyStart !== undefined) return { offset: keyStart, node: null };
      keyOffset = keyStart ?? keyOffset;
      node = pair.value;
      offset = rangeStart(pair.value as Node) ?? keyStart ?? offset;
    } else if (isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg];
      if (item === undefined) return { offset, node: null };
      node = item;
      offset = rangeStart(item as Node) ?? offset;
      keyOffset = offset;
    } else {
      return { offset, node: null };
    }
  }
  return { offset, node };
}

function rangeStart(node: Node | null | undefined): number | undefined {
  const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
  return range ? range[0] : undefined;
}
