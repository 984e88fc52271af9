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
  const strict = newAjv(false);
  const coercing = newAjv(true);
  return ({ schema, httpPart }) => (httpPart === 'body' ? strict : coercing).compile(schema);
}

/** The `{environment}` path parameter, named as the topology schema names environments (metadata.name). */
export const environmentParams = {
  type: 'object',
  required: ['environment'],
  properties: { environment: { type: 'string', pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$' } },
} as const;
