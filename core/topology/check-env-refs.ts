import { has } from '../records.js';
import { refPlaceholders, unknownPlaceholders } from './dependency-refs.js';
import type { PathProblem } from './diagnostic.js';
import type { ComponentFile, TopologyFile } from './file-types.js';
import { suggest } from './validate-schema.js';

/**
 * A reference in a component's `env` (`{ ref: db, format: … }`) names a component this one
 * `dependsOn` (only a dependency is stood up before it, in the same generation), and its format
 * uses only the known placeholders. Takes a schema-valid file; an entry too malformed to read is
 * skipped (the schema's errors describe it), and so are the `checked` ones (see checkTopology).
 */
export function checkEnvRefs(file: TopologyFile, checked?: ReadonlySet<string>): PathProblem[] {
  const problems: PathProblem[] = [];
  const components = file.components ?? {};
  const names = Object.keys(components);
  for (let n = 0; n < names.length; n++) {
    const name = names[n] as string;
    // A reference reaches only the component's own `dependsOn`: one that passed before passes again.
    if (checked?.has(name)) continue;
    // An own key (from Object.keys): a plain read is enough, and `__proto__` reads the own value.
    const component = components[name] as ComponentFile;
    const env = component?.env;
    if (env === null || typeof env !== 'object') continue;
    // Keys, not entries: no pair per value (most values are text, skipped at once).
    for (const key of Object.keys(env)) {
      const value = env[key];
      if (value === null || typeof value !== 'object' || !('ref' in value)) continue;
      const dependsOn = Array.isArray(component.dependsOn) ? component.dependsOn : [];
      const at = ['components', name, 'env', key];
      const { ref, format } = value;
      if (typeof ref === 'string' && !dependsOn.includes(ref)) {
        problems.push({ path: [...at, 'ref'], message: notADependency(name, ref, dependsOn, file) });
      }
      if (typeof format !== 'string') continue;
      for (const placeholder of unknownPlaceholders(format)) {
        const hint = suggest(placeholder, refPlaceholders);
        problems.push({
          path: [...at, 'format'],
          message: `unknown placeholder {${placeholder}}${hint ? `; did you mean {${hint}}?` : ''} (known: ${refPlaceholders.map((p) => `{${p}}`).join(', ')})`,
        });
      }
    }
  }
  return problems;
}

function notADependency(name: string, ref: string, dependsOn: readonly string[], file: TopologyFile): string {
  if (ref === name) return 'a component cannot refer to itself';
  if (has(file.components, ref))
    return `component "${ref}" is not in dependsOn of ${name}: add it there (a reference reaches only a dependency, which is stood up first)`;
  const hint = suggest(ref, dependsOn) ?? suggest(ref, Object.keys(file.components));
  return `unknown component "${ref}"${hint ? `; did you mean "${hint}"?` : ''} (a reference names a component in dependsOn of ${name})`;
}
