import fc from 'fast-check';
import { durationUnitArb, nameArb } from './topology-arbitraries.js';

/** Ways of breaking a topology file: mutations of its text, and of its structure before rendering. */

/** Characters that mean something in YAML. */
const yamlPunctuation = [
  ':',
  '-',
  '&',
  '*',
  '\t',
  ' ',
  '  ',
  '\n',
  '{',
  '}',
  '[',
  ']',
  '#',
  '"',
  "'",
  '!',
  '|',
  '>',
  '<<',
  '%',
  '@',
  '`',
  '?',
  ',',
  '&a ',
  '*a',
  '\r\n',
  '\\',
  '\u00a0',
  '\ufeff',
];

export type TextMutation =
  | { kind: 'delete'; at: number; length: number }
  | { kind: 'insert'; at: number; text: string }
  | { kind: 'indent'; line: number; by: number }
  | { kind: 'duplicateLine'; line: number }
  | { kind: 'swapLines'; line: number; other: number }
  | { kind: 'truncate'; at: number };

export const textMutationArb: fc.Arbitrary<TextMutation> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('delete' as const),
      at: fc.nat(),
      length: fc.integer({ min: 1, max: 4 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('insert' as const),
      at: fc.nat(),
      text: fc.oneof(fc.constantFrom(...yamlPunctuation), fc.string({ maxLength: 3 })),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('indent' as const),
      line: fc.nat(),
      by: fc.integer({ min: -4, max: 4 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('duplicateLine' as const), line: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('swapLines' as const), line: fc.nat(), other: fc.nat() }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }) },
);

export function mutateText(text: string, mutations: readonly TextMutation[]): string {
  let out = text;
  for (const m of mutations) {
    switch (m.kind) {
      case 'delete': {
        const at = m.at % (out.length + 1);
        out = out.slice(0, at) + out.slice(at + m.length);
        break;
      }
      case 'insert': {
        const at = m.at % (out.length + 1);
        out = out.slice(0, at) + m.text + out.slice(at);
        break;
      }
      case 'truncate':
        out = out.slice(0, m.at % (out.length + 1));
        break;
      default: {
        const lines = out.split('\n');
        const i = m.line % lines.length;
        const line = lines[i] as string;
        if (m.kind === 'indent') {
          lines[i] = m.by >= 0 ? ' '.repeat(m.by) + line : line.replace(new RegExp(`^ {0,${-m.by}}`), '');
        } else if (m.kind === 'duplicateLine') {
          lines.splice(i, 0, line);
        } else {
          const j = m.other % lines.length;
          lines[i] = lines[j] as string;
          lines[j] = line;
        }
        out = lines.join('\n');
      }
    }
  }
  return out;
}

/** Values to plant inside a valid file: wrong types, out-of-range numbers, dangling names, huge durations. */
export const plantedValueArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(
    null,
    true,
    0,
    -1,
    1.5,
    1e21,
    '',
    'constructor',
    'toString',
    '__proto__',
    'missing',
    'UPPER',
    '-x-',
  ),
  fc.constantFrom('127.0.0.1:0', '127.0.0.1:99999', '0.0.0.0:80', '[::]:80', 'LOCALHOST:80', '[::1]:1'),
  fc.tuple(fc.stringMatching(/^[0-9]{1,25}$/), durationUnitArb).map(([n, u]) => `${n}${u}`),
  fc.constantFrom('0s', '0ms', '1m30s', '5'),
  fc.constantFrom([100], [50, 50], [0, 100], [100, 100], [10, 50], [101], []),
  fc.constantFrom('(', '[', '\\', '*', '^(?<n>a)\\k<n>$'),
);

export type StructuralMutation =
  | { kind: 'delete'; at: number }
  | { kind: 'replace'; at: number; value: unknown }
  | { kind: 'renameKey'; at: number; key: string }
  | { kind: 'addKey'; at: number; key: string; value: unknown }
  | { kind: 'copyInto'; at: number; from: number };

export const structuralMutationArb: fc.Arbitrary<StructuralMutation> = fc.oneof(
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), value: plantedValueArb }),
  fc.record({
    kind: fc.constant('renameKey' as const),
    at: fc.nat(),
    key: fc.oneof(
      nameArb,
      fc.constantFrom('replica', 'dependson', 'Version', '__proto__', 'constructor', '<<'),
    ),
  }),
  fc.record({
    kind: fc.constant('addKey' as const),
    at: fc.nat(),
    key: fc.oneof(
      nameArb,
      fc.constantFrom('extra', '__proto__', 'constructor', 'run', 'health', 'tcp', 'http'),
    ),
    value: plantedValueArb,
  }),
  fc.record({ kind: fc.constant('copyInto' as const), at: fc.nat(), from: fc.nat() }),
);

type Path = (string | number)[];

function allPaths(value: unknown): Path[] {
  const out: Path[] = [];
  const walk = (v: unknown, path: Path) => {
    out.push(path);
    if (Array.isArray(v)) {
      v.forEach((item, i) => {
        walk(item, [...path, i]);
      });
    } else if (v !== null && typeof v === 'object') {
      for (const k of Object.keys(v)) walk((v as Record<string, unknown>)[k], [...path, k]);
    }
  };
  walk(value, []);
  return out;
}

function getAt(root: unknown, path: Path): unknown {
  let v = root;
  for (const seg of path) v = (v as Record<string | number, unknown>)[seg];
  return v;
}

function setOwn(target: Record<string | number, unknown>, key: string | number, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Applies structural mutations to a deep copy of a (valid) file object. */
export function mutateStructure(file: unknown, mutations: readonly StructuralMutation[]): unknown {
  const root = { doc: structuredClone(file) } as Record<string, unknown>;
  for (const m of mutations) {
    const paths = allPaths(root.doc).map((p) => ['doc', ...p]);
    const path = paths[m.at % paths.length] as Path;
    // The document itself can be replaced, never deleted or renamed: the loader takes text.
    if (path.length === 1 && m.kind !== 'replace' && m.kind !== 'addKey') continue;
    const parent = getAt(root, path.slice(0, -1)) as Record<string | number, unknown>;
    const key = path[path.length - 1] as string | number;
    switch (m.kind) {
      case 'delete':
        if (Array.isArray(parent)) parent.splice(key as number, 1);
        else delete parent[key];
        break;
      case 'replace':
        setOwn(parent, key, structuredClone(m.value));
        break;
      case 'renameKey':
        if (!Array.isArray(parent) && typeof key === 'string' && key !== 'doc') {
          const value = parent[key];
          delete parent[key];
          setOwn(parent, m.key, value);
        }
        break;
      case 'addKey': {
        const here = getAt(root, path);
        if (here !== null && typeof here === 'object' && !Array.isArray(here)) {
          setOwn(here as Record<string, unknown>, m.key, structuredClone(m.value));
        }
        break;
      }
      case 'copyInto': {
        const source = getAt(root, paths[m.from % paths.length] as Path);
        setOwn(parent, key, structuredClone(source));
        break;
      }
    }
  }
  return root.doc;
}
