import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import jsYaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { generateTopologyPair } from '../../bench/generate-topology.js';
import { parseFastYaml } from '../../core/topology/fast-yaml.js';
import { loadWithJsYaml } from '../../core/topology/parse-yaml.js';
import { resolvePlainScalar, scalarTypes } from '../../core/topology/yaml-scalars.js';
import { mutateText, textMutationArb } from './break-topology.js';
import { toFile, topologySpecArb, toYaml, yamlStyleArb } from './topology-arbitraries.js';

/**
 * The fast YAML path (core/topology/fast-yaml.ts) must be invisible: whenever it returns a value,
 * js-yaml (with the same schema) returns the same value, down to prototypes, -0 and key order; on
 * anything else it must give up, so that js-yaml gives the value or the error.
 */
function expectSameAsJsYaml(text: string): 'fast' | 'fallback' {
  const fast = parseFastYaml(text);
  if (fast === undefined) return 'fallback';
  let reference: unknown;
  try {
    reference = loadWithJsYaml(text);
  } catch (error) {
    throw new Error(
      `the fast path read ${JSON.stringify(text)} as ${JSON.stringify(fast.value)}, js-yaml refused it: ${(error as Error).message}`,
    );
  }
  if (!isDeepStrictEqual(fast.value, reference) || !sameKeyOrder(fast.value, reference)) {
    throw new Error(
      `the fast path and js-yaml disagree on ${JSON.stringify(text)}:\nfast:    ${JSON.stringify(fast.value)}\njs-yaml: ${JSON.stringify(reference)}`,
    );
  }
  return 'fast';
}

/** isDeepStrictEqual ignores the order of keys; JSON (and so plans) do not. */
function sameKeyOrder(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.every((v, i) => sameKeyOrder(v, b[i]));
  if (a !== null && typeof a === 'object' && b !== null && typeof b === 'object') {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return (
      ka.join('\u0000') === kb.join('\u0000') &&
      ka.every((k) => sameKeyOrder((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
    );
  }
  return true;
}

/** Scalars that YAML reads in more than one way, or that end, start or break a plain scalar. */
const trickyScalars = [
  'null', 'Null', 'NULL', '~', 'true', 'True', 'TRUE', 'false', 'FALSE', 'yes', 'no', 'on', 'y',
  '0', '-0', '+0', '007', '0o17', '0O17', '0x1F', '0X1f', '0b101', '1_000', '1,000', '1.', '.5', '1.5e3',
  '1e400', '-1e3', '.inf', '-.Inf', '+.INF', '.nan', '.NaN', '12:30', '2024-01-01', '1.10', '.', '..',
  '-', '--', '---', '...', '-a', '?', '?a', ':', ':a', 'a:b', 'a:', 'a :b', 'a: b', 'a #b', 'a#b', '#a',
  '<<', '<', '&a', '*a', '!a', '!!str', '|', '>', '%a', '@a', '`a', "'", "''", "a'b", '"', 'a"b',
  '[', ']', '{', '}', 'a,b', 'a, b', '[a]', '{a: b}', 'a]', 'a}', '\\', 'a\\b', 'a  b', ' a', 'a ',
  '', ' ', 'é', 'ü:', '→', '😀', '\u00a0', '\t', '__proto__', 'constructor', 'toString', 'hasOwnProperty',
  '127.0.0.1:8080', '[::1]:8080', 'http://x/y?z=1#f', '/healthz', './apps', 'a/b', '$schema', 'A_B',
]; // biome-ignore format: a list of strings reads better packed

const scalarArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...trickyScalars) },
  { weight: 2, arbitrary: fc.stringMatching(/^[a-z0-9][a-z0-9._/-]{0,8}$/) },
  { weight: 1, arbitrary: fc.string({ maxLength: 6 }) },
);

type Node = string | Node[] | [string, Node][] | { entries: [string, Node][] };

/** A YAML tree: scalars, sequences, and mappings (as entry lists, so keys may repeat). */
const nodeArb: fc.Arbitrary<Node> = fc.letrec<{ node: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalarArb,
    fc.array(tie('node'), { maxLength: 4 }),
    fc.record({ entries: fc.array(fc.tuple(scalarArb, tie('node')), { maxLength: 4 }) }),
  ),
})).node;

const renderStyleArb = fc.record({
  indent: fc.constantFrom(1, 2, 3, 4),
  quote: fc.constantFrom('plain', 'double', 'single', 'mixed'),
  flowFrom: fc.integer({ min: 0, max: 4 }), // depth from which collections are written in flow style
  indentlessSequences: fc.boolean(),
  comments: fc.boolean(),
  seed: fc.nat(),
});
type RenderStyle = typeof renderStyleArb extends fc.Arbitrary<infer T> ? T : never;

/** Writes a tree as YAML text, by hand, in the many spellings a person might use (some of them wrong). */
function render(root: Node, style: RenderStyle): string {
  let random = style.seed;
  const roll = (n: number) => {
    random = (Math.imul(random, 1103515245) + 12345) >>> 0;
    return (random >>> 8) % n;
  };
  const scalar = (s: string): string => {
    const q = style.quote === 'mixed' ? (['plain', 'double', 'single'][roll(3)] as string) : style.quote;
    if (q === 'double') return `"${s}"`;
    if (q === 'single') return `'${s.replaceAll("'", "''")}'`;
    return s;
  };
  const comment = () => (style.comments && roll(4) === 0 ? `${' '.repeat(1 + roll(2))}# c${roll(9)}` : '');
  const flow = (node: Node): string => {
    if (typeof node === 'string') return scalar(node);
    if (Array.isArray(node)) return `[${node.map((n) => flow(n as Node)).join(', ')}]`;
    return `{ ${node.entries.map(([k, v]) => `${scalar(k)}: ${flow(v)}`).join(', ')} }`;
  };
  const lines: string[] = [];
  const block = (node: Node, depth: number, at: number): void => {
    const pad = ' '.repeat(at);
    if (Array.isArray(node)) {
      for (const item of node as Node[]) {
        if (typeof item === 'string' || depth + 1 >= style.flowFrom)
          lines.push(`${pad}- ${flow(item)}${comment()}`);
        else {
          lines.push(`${pad}-${comment()}`);
          block(item, depth + 1, at + style.indent);
        }
      }
      return;
    }
    if (typeof node === 'string') {
      lines.push(`${pad}${scalar(node)}`);
      return;
    }
    for (const [key, value] of node.entries) {
      if (style.comments && roll(6) === 0) lines.push(`${' '.repeat(roll(at + 3))}# note`);
      if (style.comments && roll(8) === 0) lines.push(' '.repeat(roll(3)));
      const k = scalar(key);
      const empty = Array.isArray(value)
        ? value.length === 0
        : typeof value === 'object' && value.entries.length === 0;
      if (typeof value === 'string' || empty || depth + 1 >= style.flowFrom) {
        lines.push(`${pad}${k}: ${flow(value)}${comment()}`);
      } else {
        lines.push(`${pad}${k}:${comment()}`);
        const inner = Array.isArray(value) && style.indentlessSequences ? at : at + style.indent;
        block(value, depth + 1, inner);
      }
    }
  };
  block(root, 0, 0);
  return `${lines.join('\n')}${roll(3) === 0 ? '' : '\n'}`;
}

const documentArb = fc.record({
  entries: fc.array(fc.tuple(scalarArb, nodeArb), { minLength: 1, maxLength: 6 }),
});

describe('the fast YAML path', () => {
  it('reads arbitrary YAML exactly as js-yaml does, or leaves it to js-yaml', () => {
    const taken = { fast: 0, fallback: 0 };
    fc.assert(
      fc.property(documentArb, renderStyleArb, (doc, style) => {
        taken[expectSameAsJsYaml(render(doc, style))]++;
      }),
      { numRuns: 3000 },
    );
    // The comparison means something only if the fast path reads a good share of the cases.
    expect(taken.fast / (taken.fast + taken.fallback)).toBeGreaterThan(0.25);
  });

  it('reads mutated YAML exactly as js-yaml does, or leaves it to js-yaml', () => {
    const taken = { fast: 0, fallback: 0 };
    fc.assert(
      fc.property(
        documentArb,
        renderStyleArb,
        fc.array(textMutationArb, { minLength: 1, maxLength: 3 }),
        (doc, style, mutations) => {
          taken[expectSameAsJsYaml(mutateText(render(doc, style), mutations))]++;
        },
      ),
      { numRuns: 3000 },
    );
    expect(taken.fast / (taken.fast + taken.fallback)).toBeGreaterThan(0.05);
  });

  it('reads valid topologies written in any style exactly as js-yaml does', () => {
    const taken = { fast: 0, fallback: 0 };
    fc.assert(
      fc.property(topologySpecArb, yamlStyleArb, (spec, style) => {
        taken[expectSameAsJsYaml(toYaml(toFile(spec), style))]++;
      }),
      { numRuns: 300 },
    );
    // These files are full of characters and escapes the fast path leaves to js-yaml; some are not.
    expect(taken.fast).toBeGreaterThan(0);
  });

  it('reads arbitrary strings exactly as js-yaml does, or leaves them to js-yaml', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60, unit: 'binary' }), (text) => {
        expectSameAsJsYaml(text);
      }),
      { numRuns: 2000 },
    );
  });

  it('takes the generated benchmark files and the examples without anchors', () => {
    const pair = generateTopologyPair(300, 7);
    expect(expectSameAsJsYaml(pair.before)).toBe('fast');
    expect(expectSameAsJsYaml(pair.after)).toBe('fast');
    for (const example of [
      'web-app/topology.yaml',
      'multi-service/topology.yaml',
      'stepped-manual/topology.yaml',
    ]) {
      const text = readFileSync(new URL(`../../examples/${example}`, import.meta.url), 'utf8');
      expect(expectSameAsJsYaml(text), example).toBe(text.includes('&') ? 'fallback' : 'fast');
    }
  });
});

describe('plain scalars (yaml-scalars.ts)', () => {
  type Type = { resolve: (s: string) => boolean; construct: (s: string) => unknown };
  const builtIn = (jsYaml as unknown as { types: Record<'null' | 'bool' | 'float', Type> }).types;
  const mine = (tag: string) => scalarTypes.find((t) => t.tag === `tag:yaml.org,2002:${tag}`) as Type;

  it('resolve null, bool and float exactly as js-yaml 4 does', () => {
    const numberLike = fc.stringMatching(/^[-+]?[0-9._eEinfINFaAxXoObB]{0,6}$/);
    fc.assert(
      fc.property(
        fc.oneof(fc.constantFrom(...trickyScalars), numberLike, fc.string({ maxLength: 6 })),
        (text) => {
          for (const tag of ['null', 'bool', 'float'] as const) {
            const resolves = builtIn[tag].resolve(text);
            expect(mine(tag).resolve(text), `${tag} ${JSON.stringify(text)}`).toBe(resolves);
            if (resolves)
              expect(Object.is(mine(tag).construct(text), builtIn[tag].construct(text))).toBe(true);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('read YAML 1.2 core: yes, 0b101, 1_000 and dates stay text', () => {
    const cases: [string, unknown][] = [
      ['yes', 'yes'], ['no', 'no'], ['on', 'on'], ['0b101', '0b101'], ['1_000', '1_000'],
      ['2024-01-01', '2024-01-01'], ['12:30', '12:30'], ['0x1F', 31], ['0o17', 15], ['017', 17],
      ['-0', -0], ['1.5', 1.5], ['.inf', Number.POSITIVE_INFINITY], ['~', null], ['True', true],
    ]; // biome-ignore format: pairs read better packed
    for (const [text, value] of cases) {
      expect(Object.is(resolvePlainScalar(text), value), text).toBe(true);
      expect(Object.is((loadWithJsYaml(`a: ${text}\n`) as { a: unknown }).a, value), text).toBe(true);
      const fast = parseFastYaml(`a: ${text}\n`);
      expect(fast, text).toBeDefined();
      expect(Object.is((fast?.value as { a: unknown } | undefined)?.a, value), text).toBe(true);
    }
  });
});
