/**
 * No module-level mutable state outside an explicit, documented cache (CONVENTIONS #9): what a
 * module needs is passed in, so nothing lives on between two callers, and tests need no reset.
 * This reads every source file of the rooms and lists the top-level declarations that can hold
 * state: a `let` or `var`, a Map, Set, WeakMap or WeakSet not typed read-only, an array not typed
 * read-only, an empty object literal not typed read-only, a static property not `readonly`. One
 * whose leading comment says `Cache:` (what it keeps, and why that is not state) is allowed.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './support/cli.js';

const rooms = ['core', 'platform', 'router', 'engine', 'views', 'cli', 'server', 'watch'];
/**
 * Test helpers that vitest's main process loads (config, reporters, sequencer, global setups): they
 * run once per run, not once per file in a worker. Left out, as are the fixtures (child processes'
 * scripts) and the unit and infra projects' constant data tables (test/property, the router's
 * differential cases).
 */
const configSide: readonly string[] = [
  'test/support/leftover-processes.ts',
  'test/support/podman-global-setup.ts',
  'test/support/projects.ts',
  'test/support/sequencer.ts',
  'test/support/summary-reporter.ts',
  'test/support/temporal-global-setup.ts',
];
const collections = new Set(['Map', 'Set', 'WeakMap', 'WeakSet', 'Array']);
/** A line that may start such a declaration (a wide net: the syntax tree decides). */
const mayHoldState =
  /^(export )?(let|var) |\bnew (Map|Set|WeakMap|WeakSet|Array)\b|\bstatic |^(export )?const .*=\s*(\[|\{\s*\})/m;

/** `file:line name (what)` for each top-level declaration of `text` that can hold state. */
function mutableState(file: string, text: string, allowed = /\bCache:/): string[] {
  // Most files declare nothing of the kind: parsed only when a line could be one.
  if (!mayHoldState.test(text)) return [];
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest);
  const found: string[] = [];
  const say = (node: ts.Node, name: string, what: string) => {
    if (
      ts
        .getLeadingCommentRanges(text, node.getFullStart())
        ?.some((r) => allowed.test(text.slice(r.pos, r.end)))
    )
      return;
    const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    found.push(`${file}:${line} ${name} (${what})`);
  };
  for (const statement of source.statements) {
    if (ts.isClassDeclaration(statement)) {
      for (const member of statement.members) {
        const modifiers = ts.canHaveModifiers(member) ? (ts.getModifiers(member) ?? []) : [];
        const is = (kind: ts.SyntaxKind) => modifiers.some((m) => m.kind === kind);
        if (
          ts.isPropertyDeclaration(member) &&
          is(ts.SyntaxKind.StaticKeyword) &&
          !is(ts.SyntaxKind.ReadonlyKeyword)
        )
          say(member, member.name.getText(source), 'a static property not readonly');
      }
    }
    if (!ts.isVariableStatement(statement)) continue;
    const constant = (statement.declarationList.flags & ts.NodeFlags.Const) !== 0;
    for (const declaration of statement.declarationList.declarations) {
      const name = declaration.name.getText(source);
      if (!constant) {
        say(statement, name, 'a let or var');
        continue;
      }
      let value = declaration.initializer;
      let asConst = false;
      while (
        value &&
        (ts.isAsExpression(value) || ts.isSatisfiesExpression(value) || ts.isParenthesizedExpression(value))
      ) {
        if (ts.isAsExpression(value) && value.type.getText(source) === 'const') asConst = true;
        value = value.expression;
      }
      const readOnly = asConst || /^(Readonly|readonly )/.test(declaration.type?.getText(source) ?? '');
      if (!value || readOnly) continue;
      if (ts.isNewExpression(value) && collections.has(value.expression.getText(source)))
        say(statement, name, `a ${value.expression.getText(source)} not typed read-only`);
      else if (ts.isArrayLiteralExpression(value)) say(statement, name, 'an array not typed read-only');
      else if (ts.isObjectLiteralExpression(value) && value.properties.length === 0)
        say(statement, name, 'an empty object not typed read-only');
    }
  }
  return found;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(repoRoot, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(relative);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [relative] : [];
  });
}

describe('module-level state', () => {
  it('is nowhere in the rooms but in documented caches', () => {
    const files = rooms.flatMap(sourceFiles);
    expect(files.length).toBeGreaterThan(100);
    const found = files.flatMap((file) =>
      mutableState(file, readFileSync(path.join(repoRoot, file), 'utf8')),
    );
    expect(found).toEqual([]);
  });

  it('is nowhere in the test helpers but in documented caches and registries emptied per file', () => {
    // The integration and unit projects run many files in one process, each helper module loaded
    // once for all of them: state a helper keeps would pass from one file to the next. A
    // `Registry:` (what a test registers for its cleanup) is allowed when every file empties it.
    const helpers = sourceFiles('test').filter(
      (file) =>
        !file.endsWith('.test.ts') &&
        !/^test\/(fixtures|property)\/|^test\/router\/differential-/.test(file) &&
        !configSide.includes(file),
    );
    expect(helpers.length).toBeGreaterThan(20);
    const found = helpers.flatMap((file) =>
      mutableState(file, readFileSync(path.join(repoRoot, file), 'utf8'), /\b(Cache|Registry):/),
    );
    expect(found).toEqual([]);
  });

  it('finds each kind, and lets read-only values and documented caches through', () => {
    const text = [
      'let counter = 0;',
      'export var legacy = 1;',
      'const ledger = new Map<number, number>();',
      'const seen = new Set([1]);',
      'const queue: string[] = [];',
      'const bag: Record<string, number> = {};',
      'class Registry { static instances = 0; static readonly limit = 3; }',
      'const names: ReadonlySet<string> = new Set(["a"]);',
      'const order: readonly number[] = [1, 2];',
      'const steps = [1, 2] as const;',
      'const none: Readonly<Record<string, number>> = {};',
      'const table = { a: 1 };',
      '/** Cache: compiled once per process. */',
      'let compiled: unknown;',
      '// Cache: keyed by an object nobody changes.',
      'const index = new WeakMap<object, number>();',
    ].join('\n');
    expect(mutableState('x.ts', text)).toEqual([
      'x.ts:1 counter (a let or var)',
      'x.ts:2 legacy (a let or var)',
      'x.ts:3 ledger (a Map not typed read-only)',
      'x.ts:4 seen (a Set not typed read-only)',
      'x.ts:5 queue (an array not typed read-only)',
      'x.ts:6 bag (an empty object not typed read-only)',
      'x.ts:7 instances (a static property not readonly)',
    ]);
  });
});
