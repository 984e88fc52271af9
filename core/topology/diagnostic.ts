/** One located problem in a topology file. Lines and columns are 1-based. */
export interface Diagnostic {
  file: string;
  line: number;
  column: number;
  /** Dotted path of the offending value, e.g. `components.api.replicas`; empty for syntax errors. */
  path: string;
  message: string;
}

/** `topology.yaml:14:7 components.api.replicas: must be >= 1` */
export function formatDiagnostic(d: Diagnostic): string {
  const where = `${d.file}:${d.line}:${d.column}`;
  return d.path ? `${where} ${d.path}: ${d.message}` : `${where}: ${d.message}`;
}

export function compareDiagnostics(a: Diagnostic, b: Diagnostic): number {
  return (
    a.line - b.line || a.column - b.column || (a.message < b.message ? -1 : a.message > b.message ? 1 : 0)
  );
}

/** A problem found before locating it: the path as segments (keys and indexes). */
export interface PathProblem {
  path: readonly (string | number)[];
  message: string;
  /** Point at the key rather than the value (unknown keys, duplicate names). */
  atKey?: boolean;
  /**
   * The message with the offending value as written in the file, when it is a plain scalar there:
   * `version: 1.10` is the number 1.1 once parsed, but the hint should say "1.10".
   */
  withSource?: (written: string) => string;
}

export function dottedPath(path: readonly (string | number)[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(seg)) out += out ? `.${seg}` : seg;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out;
}
