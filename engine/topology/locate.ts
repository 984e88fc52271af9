import { isMap, isPair, isScalar, isSeq, LineCounter, type Node, parseDocument } from 'yaml';
import type { Diagnostic, PathProblem } from './diagnostic.js';
import { compareDiagnostics, dottedPath } from './diagnostic.js';

/**
 * Turns path problems into located diagnostics. Runs only when there is something to report: it
 * builds a full YAML syntax tree (slow on large files), which the happy path never needs.
 */
export function locateProblems(file: string, text: string, problems: readonly PathProblem[]): Diagnostic[] {
  const lineCounter = new LineCounter();
  // The tree is used for positions only; its own limits must never hide our diagnostics.
  const doc = parseDocument(text, { lineCounter, uniqueKeys: false, merge: true, prettyErrors: false });
  const out = problems.map((problem) => {
    const offset = findOffset(doc.contents as Node | null, problem);
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

/** Offset of the deepest node on the path (the key itself for `atKey` problems). */
function findOffset(root: Node | null, problem: PathProblem): number {
  let node: unknown = root;
  let offset = rangeStart(root) ?? 0;
  const last = problem.path.length - 1;
  for (let i = 0; i <= last; i++) {
    const seg = problem.path[i];
    if (isMap(node)) {
      const pair = node.items.find((p) => isPair(p) && keyText(p.key) === String(seg));
      if (!pair) return offset;
      const keyStart = rangeStart(pair.key as Node);
      if (i === last && problem.atKey && keyStart !== undefined) return keyStart;
      node = pair.value;
      offset = rangeStart(pair.value as Node) ?? keyStart ?? offset;
    } else if (isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg];
      if (item === undefined) return offset;
      node = item;
      offset = rangeStart(item as Node) ?? offset;
    } else {
      return offset;
    }
  }
  return offset;
}

function keyText(key: unknown): string | undefined {
  if (isScalar(key)) return String(key.value);
  return undefined;
}

function rangeStart(node: Node | null | undefined): number | undefined {
  const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
  return range ? range[0] : undefined;
}
