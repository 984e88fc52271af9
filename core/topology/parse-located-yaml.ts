import type { ComponentReuse, ComponentsRead } from './component-reuse.js';
import type { Diagnostic } from './diagnostic.js';
import { locateDuplicateKey, locateProblems } from './locate.js';
import { defaultParseLimits, type ParseLimits, parseYaml } from './parse-yaml.js';

export type LocatedYaml =
  | { ok: true; value: unknown; read?: ComponentsRead }
  | { ok: false; diagnostic: Diagnostic };

/**
 * YAML text from outside (a topology, a tokens file) → plain data, or the one problem that stopped
 * it, located by file, line and column. Every YAML the project reads from outside comes through
 * here, so the alias-expansion bound of `parseYaml` holds for all of it. Pure and total.
 */
export function parseLocatedYaml(
  text: string,
  file: string,
  limits: ParseLimits = defaultParseLimits,
  reuse?: Pick<ComponentReuse, 'lines'>,
): LocatedYaml {
  const parsed = parseYaml(text, limits, reuse);
  if (parsed.ok) return parsed;
  if ('problem' in parsed) {
    return { ok: false, diagnostic: locateProblems(file, text, [parsed.problem])[0] as Diagnostic };
  }
  const duplicate =
    parsed.message === 'YAML syntax: duplicated mapping key'
      ? locateDuplicateKey(file, text, parsed.line, parsed.column)
      : null;
  return {
    ok: false,
    diagnostic: duplicate ?? {
      file,
      line: parsed.line,
      column: parsed.column,
      path: '',
      message: parsed.message,
    },
  };
}
