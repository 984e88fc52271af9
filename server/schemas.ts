/**
 * The API's schemas come from schemas/api.v1.json, one file with a `$defs` entry per payload (so
 * editors and other tools can use it). Each entry becomes a named schema (`$id` = its name) that
 * routes reference as `Name#` and that the OpenAPI document lists under components.schemas.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import apiSchema from '../schemas/api.v1.json' with { type: 'json' };

export type SchemaName = keyof (typeof apiSchema)['$defs'];

/** `{ $ref: 'Name#' }`. */
export function ref(name: SchemaName): { $ref: string } {
  return { $ref: `${name}#` };
}

function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    if (key === '$ref' && typeof inner === 'string' && inner.startsWith('#/$defs/')) {
      out[key] = `${inner.slice('#/$defs/'.length)}#`;
    } else {
      out[key] = rewriteRefs(inner);
    }
  }
  return out;
}

/** Every named schema, with `$id` set and references between them rewritten to `Name#`. */
export function namedSchemas(): Record<string, unknown>[] {
  return Object.entries(apiSchema.$defs).map(([name, def]) => ({
    $id: name,
    ...(rewriteRefs(def) as Record<string, unknown>),
  }));
}

function newAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    strict: false,
    coerceTypes: coerce ? 'array' : false,
    useDefaults: coerce,
    removeAdditional: false,
    // Times appear only in answers (ISO 8601); requests carry none, so the format is named, not checked.
    formats: { 'date-time': true },
  });
  for (const schema of namedSchemas()) ajv.addSchema(schema);
  return ajv;
}

/**
 * Validator compilers for Fastify: bodies are checked strictly (no type coercion, unknown keys are
 * errors, every error reported); query strings and path parameters coerce, as they are text.
 */
export function validatorCompilers(): (route: { schema: object; httpPart?: string }) => ValidateFunction {
  const ajvs: { strict?: Ajv; coercing?: Ajv } = {};
  const ajvFor = (httpPart: string | undefined): Ajv => {
    if (httpPart === 'body') {
      ajvs.strict ??= newAjv(false);
      return ajvs.strict;
    }
    ajvs.coercing ??= newAjv(true);
    return ajvs.coercing;
  };
  return ({ schema, httpPart }) => compiledOnFirstUse(() => ajvFor(httpPart).compile(schema));
}

/**
 * A validator compiled when it first validates, not when the server starts: compiling every
 * route's schemas cost each `cutover server` start most of its ~40 ms of Ajv work, for routes most
 * runs never call. The schemas are constants of the package (test/server covers each route), so a
 * schema that does not compile is not a user's error at either moment. Fastify reads `schemaEnv`
 * (to let coercion replace a root value) and `errors` from the function it is given.
 */
function compiledOnFirstUse(compile: () => ValidateFunction): ValidateFunction {
  let compiled: ValidateFunction | undefined;
  const get = (): ValidateFunction => {
    compiled ??= compile();
    return compiled;
  };
  const validate = ((data: unknown, context?: Parameters<ValidateFunction>[1]) =>
    get()(data, context)) as ValidateFunction;
  Object.defineProperties(validate, {
    errors: {
      get: () => get().errors,
      set: (errors: ValidateFunction['errors']) => {
        get().errors = errors;
      },
    },
    schemaEnv: { get: () => get().schemaEnv },
    schema: { get: () => get().schema },
  });
  return validate;
}

/** The `{environment}` path parameter, named as the topology schema names environments (metadata.name). */
export const environmentParams = {
  type: 'object',
  required: ['environment'],
  properties: { environment: { type: 'string', pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$' } },
} as const;
