import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTopologyPair } from '../../../bench/generate-topology.js';
import { minAsideChars } from '../../../engine/sources/check-aside.js';
import { repoRoot, runBinary, runCli, tempDir } from '../../support/cli.js';

/**
 * A plan of a large text checks it on another thread (engine/sources/check-aside.ts) while the
 * model is made and planned. The compiled CLI does (its worker exists in dist/); the in-process CLI,
 * run from the TypeScript sources, checks on its own thread: the two must print the same bytes, for
 * a plan and for every kind of problem, in the same order of precedence (the desired file's
 * problems, then --replace, then the base file's).
 */
describe('plan of large texts, checked aside', { timeout: 120_000 }, () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let before: string;
  let after: string;

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    const pair = generateTopologyPair(3_200, 20240601);
    before = pair.before;
    after = pair.after;
    expect(after.length).toBeGreaterThan(minAsideChars);
    // The compiled CLI checks aside only with its worker built beside it.
    expect(existsSync(path.join(repoRoot, 'dist', 'engine', 'sources', 'topology-check-worker.js'))).toBe(
      true,
    );
    await writeFile(path.join(dir, 'before.yaml'), before);
    await writeFile(path.join(dir, 'after.yaml'), after);
  });
  afterAll(() => cleanup());

  /** The plan of `desired` against `base` (texts), by the compiled CLI and in process: equal. */
  async function bothWays(desired: string, base: string, extra: string[] = []) {
    await writeFile(path.join(dir, 'd.yaml'), desired);
    await writeFile(path.join(dir, 'b.yaml'), base);
    const args = ['topology', 'plan', '-f', 'd.yaml', '--against', 'b.yaml', '--format', 'json', ...extra];
    const env = { CUTOVER_STATE_DIR: path.join(dir, '.state') };
    const [binary, here] = await Promise.all([
      runBinary(args, { cwd: dir, env }),
      runCli(args, { cwd: dir, env }),
    ]);
    expect(binary).toEqual(here);
    return binary;
  }

  /** Where and what the problems of a refused plan are (`--format json` prints them on stdout). */
  function problems(result: { code: number; stdout: string }): string[] {
    expect(result.code).toBe(1);
    const { error } = JSON.parse(result.stdout) as {
      error: {
        message: string;
        diagnostics?: { file: string; line: number; path: string; message: string }[];
      };
    };
    return (error.diagnostics ?? [{ file: '', line: 0, path: '', message: error.message }]).map(
      (d) => `${d.file}:${d.line} ${d.path}: ${d.message}`,
    );
  }

  /** `after` with the first line `from` after component `name` replaced by `to`. */
  function edit(text: string, name: string, from: string, to: string): string {
    const at = text.indexOf(from, text.indexOf(`\n  ${name}:\n`));
    expect(at).toBeGreaterThan(0);
    return text.slice(0, at) + to + text.slice(at + from.length);
  }

  it("the compiled checking thread reports exactly the loader's problems (as on more than 2 cores)", async () => {
    // On 2 cores (CI) a text this size is checked on the CLI's own thread, so the other tests do
    // not reach the checking thread there: here the compiled module is asked as on 4 cores.
    const dist = (file: string) => pathToFileURL(path.join(repoRoot, 'dist', file)).href;
    const aside = (await import(
      dist('engine/sources/check-aside.js')
    )) as typeof import('../../../engine/sources/check-aside.js');
    const loader = (await import(
      dist('core/topology/load-topology.js')
    )) as typeof import('../../../core/topology/load-topology.js');
    const badBase = edit(before, 'svc-3000', '    version: ', '    stateful: maybe\n    version: ');
    const cycle = edit(after, 'svc-0000', '    version: ', '    dependsOn: [svc-0001]\n    version: ');
    for (const [desired, base] of [
      [after, before],
      [after, badBase],
      [cycle, before],
    ] as const) {
      const texts = [
        { text: desired, file: 'd.yaml' },
        { text: base, file: 'b.yaml' },
      ] as const;
      expect(aside.checkAside(...texts, 2)).toBeUndefined();
      const problems = await aside.checkAside(...texts, 4);
      expect(problems).toEqual(loader.planTextProblems(...texts));
    }
  });

  it('gives the same plan', async () => {
    const result = await bothWays(after, before);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout).summary.change).toBeGreaterThan(0);
  });

  it('reports a YAML syntax error and a cycle as a load here does', async () => {
    // Neither has a model to plan from: no model (syntax), and a plan that cannot order the cycle.
    const syntax = await bothWays(
      edit(after, 'svc-3002', '    version: ', '    version: [\n    version: '),
      before,
    );
    expect(problems(syntax)).toEqual([expect.stringMatching(/^d\.yaml:\d+ : YAML syntax/)]);
    const cycle = await bothWays(
      edit(after, 'svc-0000', '    version: ', '    dependsOn: [svc-0001]\n    version: '),
      before,
    );
    expect(problems(cycle).join('\n')).toMatch(/cycle/);
  });

  it("puts the desired file's problems before --replace's and the base file's", async () => {
    const badDesired = edit(after, 'svc-3000', '    version: ', '    stateful: maybe\n    version: ');
    const badBase = edit(before, 'svc-3000', '    version: ', '    stateful: maybe\n    version: ');
    const both = await bothWays(badDesired, badBase, ['--replace', 'no-such']);
    expect(problems(both)).toEqual([expect.stringMatching(/^d\.yaml:\d+ components\.svc-3000\.stateful: /)]);
    const replace = await bothWays(after, badBase, ['--replace', 'no-such']);
    expect(problems(replace)).toEqual([expect.stringMatching(/--replace no-such/)]);
    const base = await bothWays(after, badBase);
    expect(problems(base)).toEqual([expect.stringMatching(/^b\.yaml:\d+ components\.svc-3000\.stateful: /)]);
  });
});
