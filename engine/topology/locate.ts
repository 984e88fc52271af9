import { createRequire } from 'node:module';
import type { Node } from 'yaml';
import type { Diagnostic, PathProblem } from './diagnostic.js';
import { compareDiagnostics, dottedPath } from './diagnostic.js';

/**
 * Turns path problems into located diagnostics. Runs only when there is something to report: it
 * builds a full YAML syntax tree (slow on large files), which the happy path never needs.
 */
export function locateProblems(file: string, text: string, problems: readonly PathProblem[]): Diagnostic[] {
  // Loaded on first use: valid files (the common case, and every CLI start) never pay for it.
  yaml ??= createRequire(import.meta.url)('yaml') as YamlModule;
  const { LineCounter, parseDocument } = yaml;
  const lineCounter = new LineCounter();
  // The tree is used for positions only; its own limits must never hide our diagnostics.
  const doc = parseDocument(text, { lineCounter, uniqueKeys: false, merge: true, prettyErrors: false });
  const index = new WeakMap<object, Map<string, unknown>>();
  const out = problems.map((problem) => {
    const offset = findOffset(yaml as YamlModule, doc.contents as Node | null, problem, index);
    const pos = lineCounter.linePos(offset);
    return {
      file,
      line: pos.line,
      column: pos.col,
      path: dottedPath(problem.path),
      message: problem.message,
    };
  });
  return out.sort(compareDiagnostics);
}

type YamlModule = typeof import('yaml');
let yaml: YamlModule | undefined;

/** Offset of the deepest node on the path (the key itself for `atKey` problems). */
function findOffset(
  { isMap, isPair, isSeq, isScalar }: YamlModule,
  root: Node | null,
  problem: PathProblem,
  index: WeakMap<object, Map<string, unknown>>,
): number {
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
      if (!pair) return keyOffset;
      const keyStart = rangeStart(pair.key as Node);
      if (i === last && problem.atKey && keyStart !== undefined) return keyStart;
      keyOffset = keyStart ?? keyOffset;
      node = pair.value;
      offset = rangeStart(pair.value as Node) ?? keyStart ?? offset;
    } else if (isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg];
      if (item === undefined) return offset;
      node = item;
      offset = rangeStart(item as Node) ?? offset;
      keyOffset = offset;
    } else {
      return offset;
    }
  }
  return offset;
}

function rangeStart(node: Node | null | undefined): number | undefined {
  const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
  return range ? range[0] : undefined;
}
