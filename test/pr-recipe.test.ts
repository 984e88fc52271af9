/**
 * The pull-request recipe (examples/ci/pull-request-plan.yml): its plan step, run for real with
 * bash against a real repository whose pull-request branch changes one topology and breaks another,
 * writes one comment with the marker, a plan per file, and a failure status for the broken one.
 */
import { execFile } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import yaml from 'js-yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { repoRoot, tempDir } from './support/cli.js';

const run = promisify(execFile);
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

interface Workflow {
  env: Record<string, string>;
  jobs: { plan: { steps: { name?: string; run?: string }[] } };
}

const gitEnv = {
  GIT_AUTHOR_NAME: 'test',
  GIT_AUTHOR_EMAIL: 'test@example.invalid',
  GIT_COMMITTER_NAME: 'test',
  GIT_COMMITTER_EMAIL: 'test@example.invalid',
};

describe('the pull-request plan recipe', () => {
  it('plans each topology against the base branch into one marked comment', async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const workflow = yaml.load(
      readFileSync(path.join(repoRoot, 'examples/ci/pull-request-plan.yml'), 'utf8'),
    ) as Workflow;
    const step = workflow.jobs.plan.steps.find((s) => s.name === 'Plan against the base branch');
    expect(step?.run).toBeDefined();

    // `cutover` on the PATH, as `npm install --global cutover` would put it.
    const bin = path.join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(
      path.join(bin, 'cutover'),
      `#!/bin/sh\nexec "${process.execPath}" "${path.join(repoRoot, 'bin/cutover.js')}" "$@"\n`,
    );
    chmodSync(path.join(bin, 'cutover'), 0o755);

    // The base branch has two environments; the pull request bumps one and breaks the other.
    const origin = path.join(dir, 'origin');
    const env = { ...process.env, ...gitEnv, NO_COLOR: '1' };
    for (const name of ['shop', 'blog']) {
      mkdirSync(path.join(origin, 'envs', name), { recursive: true });
      cpSync(
        path.join(repoRoot, 'examples/changes/version-bump/before.yaml'),
        path.join(origin, 'envs', name, 'topology.yaml'),
      );
    }
    await run('git', ['init', '-q', '-b', 'main'], { cwd: origin, env });
    await run('git', ['add', '-A'], { cwd: origin, env });
    await run('git', ['commit', '-qm', 'base'], { cwd: origin, env });
    const checkout = path.join(dir, 'checkout');
    await run('git', ['clone', '-q', origin, checkout], { env });
    await run('git', ['checkout', '-q', '-b', 'pr'], { cwd: checkout, env });
    cpSync(
      path.join(repoRoot, 'examples/changes/version-bump/after.yaml'),
      path.join(checkout, 'envs/shop/topology.yaml'),
    );
    writeFileSync(path.join(checkout, 'envs/blog/topology.yaml'), 'apiVersion: cutover/v1\nkind: Nope\n');
    await run('git', ['commit', '-qam', 'bump shop, break blog'], { cwd: checkout, env });

    // The workflow's expression for the base branch, as GitHub would substitute it.
    const baseRefExpression = ['$', '{{ github.base_ref }}'].join('');
    const script = String(step?.run).replaceAll(baseRefExpression, 'main');
    const output = path.join(dir, 'github-output');
    writeFileSync(output, '');
    await run('bash', ['-e', '-c', script], {
      cwd: checkout,
      env: {
        ...env,
        PATH: `${bin}:${process.env.PATH}`,
        TOPOLOGIES: workflow.env.TOPOLOGIES,
        GITHUB_OUTPUT: output,
      },
    });

    const comment = readFileSync(path.join(checkout, 'comment.md'), 'utf8');
    expect(comment.startsWith('<!-- cutover-plan -->\n')).toBe(true);
    expect(comment).toContain('### cutover plan for `bump-demo`');
    expect(comment).toContain('**Plan: 0 to add, 2 to change, 0 to remove; 10 actions.**');
    expect(comment).toContain('### cutover: `envs/blog/topology.yaml` could not be planned');
    expect(comment).toMatch(/envs\/blog\/topology\.yaml:2:7 kind: must be "Topology"/);
    expect(readFileSync(output, 'utf8')).toBe('status=1\n');
  });
});
