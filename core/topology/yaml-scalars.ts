/**
 * How plain scalars resolve: YAML 1.2 core (null, bool, int, float), the same functions for the fast
 * path (fast-yaml.ts) and for js-yaml (parse-yaml.ts builds its schema from them), so the two paths
 * cannot disagree on a scalar. null, bool and float are js-yaml 4's own definitions; int is narrower
 * than js-yaml's (see below). Merge keys (`<<`) are left to js-yaml.
 */
export interface ScalarType {
  tag: string;
  resolve: (data: string) => boolean;
  construct: (data: string) => unknown;
}

const nullType: ScalarType = {
  tag: 'tag:yaml.org,2002:null',
  resolve: (data) =>
    (data.length === 1 && data === '~') ||
    (data.length === 4 && (data === 'null' || data === 'Null' || data === 'NULL')),
  construct: () => null,
};

const boolType: ScalarType = {
  tag: 'tag:yaml.org,2002:bool',
  resolve: (data) =>
    (data.length === 4 && (data === 'true' || data === 'True' || data === 'TRUE')) ||
    (data.length === 5 && (data === 'false' || data === 'False' || data === 'FALSE')),
  construct: (data) => data === 'true' || data === 'True' || data === 'TRUE',
};

/**
 * Integers as YAML 1.2 core has them: decimal, 0o octal, 0x hex. js-yaml's own int type also takes
 * YAML 1.1 forms (0b binary, 1_000), which would silently turn a name like `0b0` into `0`.
 */
const intType: ScalarType = {
  tag: 'tag:yaml.org,2002:int',
  resolve: (data) => /^[-+]?[0-9]+$|^0o[0-7]+$|^0x[0-9a-fA-F]+$/.test(data),
  construct: (data) => {
    if (data.startsWith('0o')) return Number.parseInt(data.slice(2), 8);
    if (data.startsWith('0x')) return Number.parseInt(data.slice(2), 16);
    return Number.parseInt(data, 10);
  },
};

const floatPattern =
  /^(?:[-+]?(?:[0-9]+)(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/;
const floatSpecialPattern = /^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/;

const floatType: ScalarType = {
  tag: 'tag:yaml.org,2002:float',
  resolve: (data) => {
    if (!floatPattern.test(data)) return false;
    if (Number.isFinite(Number.parseFloat(data))) return true;
    return floatSpecialPattern.test(data);
  },
  construct: (data) => {
    let value = data.toLowerCase();
    const sign = value[0] === '-' ? -1 : 1;
    if (value[0] === '+' || value[0] === '-') value = value.slice(1);
    if (value === '.inf') return sign === 1 ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY;
    if (value === '.nan') return Number.NaN;
    return sign * Number.parseFloat(value);
  },
};

/** In the order they are tried: the first that resolves a scalar constructs its value. */
export const scalarTypes: readonly ScalarType[] = [nullType, boolType, intType, floatType];

/** The value of a plain scalar (a string when no type resolves it). */
export function resolvePlainScalar(text: string): unknown {
  // Every type above only resolves texts starting with one of ~ n N t T f F 0-9 + - .
  const c = text.charCodeAt(0);
  if (
    !(
      (c >= 48 && c <= 57) ||
      c === 126 ||
      c === 110 ||
      c === 78 ||
      c === 116 ||
      c === 84 ||
      c === 102 ||
      c === 70 ||
      c === 43 ||
      c === 45 ||
      c === 46
    )
  ) {
    return text;
  }
  for (const type of scalarTypes) {
    if (type.resolve(text)) return type.construct(text);
  }
  return text;
}
