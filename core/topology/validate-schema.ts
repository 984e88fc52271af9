import { createRequire } from 'node:module';
import type { Ajv as AjvClass, ErrorObject } from 'ajv';
import analysisSchema from '../../schemas/analysis.v1.json' with { type: 'json' };
import topologySchema from '../../schemas/topology.v1.json' with { type: 'json' };
import topologyHooksSchema from '../../schemas/topology-hooks.v1.json' with { type: 'json' };
import { ajvOptions } from './ajv-options.js';
import type { PathProblem } from './diagnostic.js';

/** The topology schema, and the fragment it refers to for `strategy.hooks`. */
export { topologyHooksSchema, topologySchema };

type Validate = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };

/**
 * Cache: the validator, loaded (or compiled) on first use, once per process; its input is a
 * constant. The build precompiles the schema (scripts/build-validator.mjs); compiling it here instead costs
 * ~70 ms at every start. Running from source (tests), the schema is compiled once per process.
 */
let compiled: Validate | undefined;

function validator(): Validate {
  if (!compiled) {
    const require = createRequire(import.meta.url);
    try {
      compiled = require('./topology-validator.generated.cjs') as Validate;
    } catch {
      const { Ajv } = require('ajv') as { Ajv: typeof AjvClass };
      compiled = new Ajv(ajvOptions)
        .addSchema(topologyHooksSchema)
        .addSchema(analysisSchema)
        .compile(topologySchema) as Validate;
    }
  }
  return compiled;
}

/** Validates parsed YAML against `schemas/topology.v1.json`; every error, as path problems. */
export function validateAgainstSchema(value: unknown): PathProblem[] {
  const validate = validator();
  if (validate(value)) return [];
  if (value === undefined || value === null) {
    return [
      {
        path: [],
        message: 'the file is empty; expected a topology (apiVersion: cutover/v1, kind: Topology, …)',
      },
    ];
  }
  const problems: PathProblem[] = [];
  const seen = new Set<string>();
  for (const error of relevantErrors(validate.errors ?? [])) {
    const problem = toProblem(error, value);
    if (!problem) continue;
    const key = `${problem.path.join('\u0000')}\u0001${problem.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    problems.push(problem);
  }
  return problems;
}

/**
 * A shift step is a number or an object, and a hold a duration or `manual` (anyOf): ajv reports
 * every branch that failed. The branch the value was meant for is the one with errors of its own
 * (a bad key, a bad duration); "must be an integer" for an object, "must be \"manual\"" beside a
 * bad duration and "must match a schema in anyOf" only add noise then, so they are left out.
 */
function relevantErrors(errors: readonly ErrorObject[]): ErrorObject[] {
  const branchOnly = (e: ErrorObject) =>
    e.keyword === 'anyOf' ||
    ((e.schemaPath.includes('/anyOf/') || isShiftStepType(e)) &&
      (e.keyword === 'type' || e.keyword === 'const'));
  return errors.filter((error) => {
    if (!branchOnly(error)) return true;
    const within = (other: ErrorObject) =>
      other.instancePath === error.instancePath || other.instancePath.startsWith(`${error.instancePath}/`);
    const specific = errors.some((other) => !branchOnly(other) && within(other));
    if (specific) return false;
    // Nothing more specific: keep the branches' own words, not the anyOf summary.
    return error.keyword !== 'anyOf' || !errors.some((other) => other !== error && within(other));
  });
}

/** A type error of a shift step (of its number branch, or of its object branch, reached through $ref). */
function isShiftStepType(e: ErrorObject): boolean {
  return e.keyword === 'type' && /^\/routes\/[^/]+\/shift\/\d+$/.test(e.instancePath);
}

const patternMessages: Record<string, string> = {
  name: 'must be lower-case letters, digits and dashes (at most 63), starting and ending with a letter or digit',
  duration: 'must be a duration such as 500ms, 30s, 2m or 1m30s',
  listen: 'must be host:port, e.g. 127.0.0.1:8080 or [::1]:8080',
  ipaddress: 'must be an IP address, e.g. 10.0.0.5 or fd00::5 (not a name)',
  labels: 'label keys are letters, digits and . _ / - (at most 128)',
  env: 'environment variable names are letters, digits and _, not starting with a digit',
  secret: 'secret names are letters, digits and _, not starting with a digit',
  sqlname:
    'must be a PostgreSQL name: lower-case letters, digits and _ (at most 63), not starting with a digit, neither pg_… nor postgres',
};

/** Patterns written in place rather than as a definition, by their text. */
const inlinePatternMessages: Record<string, string> = {
  '^/': 'must start with /, e.g. /healthz',
  '^https?://[^\\s]+$': 'must be an http:// or https:// URL',
};

function definitionOf(schemaPath: string): string | undefined {
  return /#\/definitions\/([a-z]+)\//.exec(schemaPath)?.[1];
}

function toProblem(error: ErrorObject, root: unknown): PathProblem | undefined {
  const path = pointerToPath(error.instancePath, root);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'if':
    case 'propertyNames':
      // `if` repeats the errors of its `then`; propertyNames repeats the pattern error of the name.
      return undefined;
    case 'required':
      return { path: [...path, String(params.missingProperty)], message: 'is required' };
    case 'additionalProperties': {
      const key = String(params.additionalProperty);
      const allowed = Object.keys((error.parentSchema as { properties?: object })?.properties ?? {}).filter(
        (k) => k !== '$schema',
      );
      const hint = suggest(key, allowed);
      const list = allowed.length > 0 ? ` (allowed here: ${allowed.join(', ')})` : '';
      return {
        path: [...path, key],
        message: `unknown key${hint ? `; did you mean "${hint}"?` : ''}${list}`,
        atKey: true,
      };
    }
    case 'pattern': {
      // A failing property name arrives with the name in params; point at the key itself.
      if (typeof params.propertyName === 'string' || error.propertyName !== undefined) {
        const name = String(error.propertyName ?? params.propertyName);
        const def = definitionOf(error.schemaPath);
        return {
          path: [...path, name],
          message: `invalid name: ${patternMessages[def ?? ''] ?? error.message}`,
          atKey: true,
        };
      }
      const def = definitionOf(error.schemaPath);
      // A shift step's hold is a duration or manual (see relevantErrors).
      if (path[path.length - 1] === 'hold')
        return { path, message: `${patternMessages.duration}, or manual` };
      const message =
        patternMessages[def ?? ''] ??
        inlinePatternMessages[String(params.pattern)] ??
        `must match ${String(params.pattern)}`;
      return { path, message };
    }
    case 'enum':
      return { path, message: `must be one of: ${(params.allowedValues as unknown[]).join(', ')}` };
    case 'const':
      return { path, message: `must be ${JSON.stringify(params.allowedValue)}` };
    case 'type': {
      const expected = String(params.type);
      if (isShiftStepType(error))
        return { path, message: 'must be a percentage, e.g. 10, or a step such as { weight: 10, hold: 2m }' };
      if (expected === 'string' && typeof error.data === 'number') {
        const duration = definitionOf(error.schemaPath) === 'duration';
        const what = duration ? 'a duration with a unit' : 'a string';
        const hint = (value: string) => `must be ${what}; e.g. "${value}${duration ? 's' : ''}"`;
        return { path, message: hint(String(error.data)), withSource: hint };
      }
      if (
        expected === 'array' &&
        typeof error.data === 'string' &&
        definitionOf(error.schemaPath) === 'command'
      ) {
        return {
          path,
          message: `must be a list of program and arguments, e.g. [${error.data.split(/\s+/).join(', ')}]`,
        };
      }
      if (expected === 'array' && typeof error.data === 'string') {
        return { path, message: `must be a list, e.g. [${error.data}]` };
      }
      return { path, message: `must be ${article(expected)} ${expected}` };
    }
    case 'uniqueItems':
      return {
        path,
        message: `must not repeat items (items ${String(params.j)} and ${String(params.i)} are equal)`,
      };
    default:
      return { path, message: error.message ?? 'is invalid' };
  }
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? 'an' : 'a';
}

/** A JSON pointer as path segments: a number only where the data there is an array. */
function pointerToPath(pointer: string, root: unknown): (string | number)[] {
  if (pointer === '') return [];
  const path: (string | number)[] = [];
  let node: unknown = root;
  for (const seg of pointer.slice(1).split('/')) {
    const key = seg.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node)) {
      path.push(Number(key));
      node = node[Number(key)];
    } else {
      path.push(key);
      node =
        node !== null && typeof node === 'object' && Object.hasOwn(node, key)
          ? (node as Record<string, unknown>)[key]
          : undefined;
    }
  }
  return path;
}

/** The allowed key closest to a misspelt one, if it is close enough to be a likely typo. */
export function suggest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const candidate of candidates) {
    const d = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0] as number;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j] as number;
      row[j] = Math.min(
        (row[j] as number) + 1,
        (row[j - 1] as number) + 1,
        previous + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      previous = current;
    }
  }
  return row[b.length] as number;
}
