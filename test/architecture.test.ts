/**
 * The rooms of the house (ARCHITECTURE.md) are enforced by `.dependency-cruiser.cjs`, which
 * `npm run lint` runs on the tree (so `npm test`, once: not again here). This test shows the rules
 * do reject an import they forbid: on a small synthetic tree in a temporary directory.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from './support/cli.js';

const run = promisify(execFile);

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

/** Runs the project's rules on `rooms` under `cwd`; the violations found. */
async function cruise(cwd: string, dirs: string[]): Promise<Violation[]> {
  const bin = path.join(repoRoot, 'node_modules', '.bin', 'depcruise');
  const config = path.join(repoRoot, '.dependency-cruiser.cjs');
  // Exit status 1 means violations: read the report either way.
  const { stdout } = await run(bin, [...dirs, '--config', config, '--output-type', 'json'], {
    cwd,
    maxBuffer: 64 * 1024 * 1024,
  }).catch((error: { stdout?: string }) => {
    if (typeof error.stdout === 'string' && error.stdout.startsWith('{')) return { stdout: error.stdout };
    throw error;
  });
  return (JSON.parse(stdout) as { summary: { violations: Violation[] } }).summary.violations;
}

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A tree of the given files (path → text), with the project's tsconfig, in a new temporary directory. */
function syntheticTree(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'cutover-architecture-'));
  dirs.push(dir);
  copyFileSync(path.join(repoRoot, 'tsconfig.json'), path.join(dir, 'tsconfig.json'));
  symlinkSync(path.join(repoRoot, 'node_modules'), path.join(dir, 'node_modules'));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  return dir;
}

describe('the import rules', () => {
  it('reject imports that go the wrong way, name the rule, and let the allowed ones through', async () => {
    const dir = syntheticTree({
      'core/model.ts': "import { api } from '../engine/api.js';\nexport const model = api;\n",
      'core/pure.ts': "import { readFileSync } from 'node:fs';\nexport const pure = readFileSync;\n",
      'core/fine.ts': "import { createHash } from 'node:crypto';\nexport const fine = createHash;\n",
      'engine/api.ts': "import { records } from '../core/records.js';\nexport const api = records;\n",
      'core/records.ts': 'export const records = 1;\n',
      'engine/runner/run.ts': "import { proxy } from '../../router/proxy.js';\nexport const run = proxy;\n",
      'engine/drivers/router-driver.ts':
        "import { proxy } from '../../router/proxy.js';\nexport const d = proxy;\n",
      'router/proxy.ts': "import { records } from '../core/records.js';\nexport const proxy = records;\n",
      'watch/watcher.ts': "import { render } from '../cli/render.js';\nexport const w = render;\n",
      'cli/render.ts': 'export const render = 1;\n',
      'cli/verb.ts':
        "import { api } from '../engine/api.js';\nimport { host } from '../engine/services/migrations.js';\nexport const verb = [api, host];\n",
      'engine/services/migrations.ts':
        "import { records } from '../../core/records.js';\nexport const host = records;\n",
      'views/a.ts': "import { b } from './b.js';\nexport const a = b;\n",
      'views/b.ts': "import { a } from './a.js';\nexport const b = () => a;\n",
    });
    const found = (await cruise(dir, ['core', 'engine', 'router', 'watch', 'cli', 'views'])).map(
      (v) => `${v.rule.name}: ${v.from} → ${v.to}`,
    );
    expect(found).toEqual(
      expect.arrayContaining([
        'core-imports-core-only: core/model.ts → engine/api.ts',
        'core-has-no-effects: core/pure.ts → fs',
        'engine-reaches-router-through-its-driver: engine/runner/run.ts → router/proxy.ts',
        'nothing-imports-cli: watch/watcher.ts → cli/render.ts',
        'front-ends-call-the-engine-api-only: cli/verb.ts → engine/services/migrations.ts',
        'no-circular: views/a.ts → views/b.ts',
      ]),
    );
    // Allowed: the core hashing, the engine and the router using the core, the router's driver, a
    // front end calling the engine API.
    expect(
      found.filter((v) => /fine\.ts|router-driver\.ts|→ core\/records\.ts|→ engine\/api\.ts/.test(v)),
    ).toEqual(['core-imports-core-only: core/model.ts → engine/api.ts']);
  });
});
