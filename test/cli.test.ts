import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { simpleGit } from 'simple-git';
import { afterEach, describe, expect, it } from 'vitest';
import { writeCurrentLayout } from '../engine/store/layout-store.js';
import { StateDir } from '../engine/store/state-dir.js';
import { clone, load, shopDoc, toYaml } from './support/builders.js';
import { repoRoot, runBinary, runCli, tempDir } from './support/cli.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function workdir(): Promise<string> {
  const { dir, cleanup } = await tempDir();
  cleanups.push(cleanup);
  return dir;
}

function exampleFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.yaml') && !full.includes(`${path.sep}.github${path.sep}`))
        out.push(full);
    }
  };
  walk(path.join(repoRoot, 'examples'));
  // examples/broken is wrong on purpose; it has a test of its own.
  return out.filter((f) => !f.includes(`${path.sep}broken${path.sep}`)).sort();
}

describe('cutover topology validate', () => {
  it('exits 0 on every example', async () => {
    const files = exampleFiles();
    expect(files.length).toBeGreaterThanOrEqual(3);
    for (const file of files) {
      const result = await runCli(['topology', 'validate', '-f', file]);
      expect({ file, code: result.code, stderr: result.stderr }).toEqual({ file, code: 0, stderr: '' });
      expect(result.stdout).toMatch(/: valid \(environment [a-z0-9-]+, \d+ components?, \d+ routes?\)\n$/);
    }
  });

  it('prints the three located errors of examples/broken and exits 1', async () => {
    const result = await runCli(['topology', 'validate', '-f', 'examples/broken/topology.yaml']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr.trim().split('\n')).toEqual([
      'examples/broken/topology.yaml:16:15 components.api.replicas: must be >= 1',
      'examples/broken/topology.yaml:17:17 components.api.dependsOn[0]: unknown component "databse"; did you mean "database"?',
      expect.stringMatching(
        /^examples\/broken\/topology\.yaml:22:5 components\.database\.helth: unknown key; did you mean "health"\?/,
      ),
      'examples/broken/topology.yaml: 3 problems',
    ]);
  });

  it('prints one located line per error and exits 1', async () => {
    const dir = await workdir();
    const doc = shopDoc();
    doc.components.api = { ...doc.components.api, replicas: 0 };
    doc.components.web = { ...doc.components.web, dependsOn: ['apii'] };
    doc.routes = { public: { listen: '127.0.0.1:18080', to: 'web', shift: [10] } };
    await writeFile(path.join(dir, 'topology.yaml'), toYaml(doc));
    const result = await runCli(['topology', 'validate'], { cwd: dir });
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines.slice(0, 3).every((l) => /^topology\.yaml:\d+:\d+ [\w.[\]]+: /.test(l))).toBe(true);
    expect(lines[3]).toBe('topology.yaml: 3 problems');
  });

  it('gives FILE:LINE:COL for broken YAML', async () => {
    const dir = await workdir();
    await writeFile(path.join(dir, 'broken.yaml'), 'apiVersion: cutover/v1\nkind: [Topology\n');
    const result = await runCli(['topology', 'validate', '-f', 'broken.yaml', '--json'], { cwd: dir });
    expect(result.code).toBe(1);
    const body = JSON.parse(result.stdout);
    expect(body.valid).toBe(false);
    expect(body.diagnostics[0]).toMatchObject({
      file: 'broken.yaml',
      line: expect.any(Number),
      column: expect.any(Number),
    });
  });

  it('says which file is missing', async () => {
    const dir = await workdir();
    const result = await runCli(['topology', 'validate'], { cwd: dir });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('cutover: topology.yaml: no such file (pass the topology with -f FILE)\n');
  });

  it('names the directory given where the topology file is expected, in validate, plan and --against', async () => {
    const dir = await workdir();
    await mkdir(path.join(dir, 'topology.yaml'));
    const line =
      'cutover: reading topology.yaml: a directory is where a file is expected (EISDIR); give the path of a file\n';
    for (const args of [
      ['topology', 'validate'],
      ['topology', 'plan'],
      [
        'topology',
        'plan',
        '-f',
        path.join(repoRoot, 'examples', 'web-app', 'topology.yaml'),
        '--against',
        'topology.yaml',
      ],
    ]) {
      const result = await runCli(args, { cwd: dir });
      expect(result.stderr, args.join(' ')).toBe(line);
      expect(result.code).toBe(1);
    }
  });

  it('a path the system cannot follow is one line, not an internal error: a loop of symbolic links, a name too long', async () => {
    const dir = await workdir();
    await symlink('b.yaml', path.join(dir, 'a.yaml'));
    await symlink('a.yaml', path.join(dir, 'b.yaml'));
    const long = `${'a'.repeat(300)}.yaml`;
    for (const [file, cause] of [
      ['a.yaml', 'a loop of symbolic links \\(ELOOP\\); fix the link, or give the path of the file itself'],
      [long, 'a file name is too long \\(ENAMETOOLONG\\); give a shorter path'],
    ] as const) {
      const result = await runCli(['topology', 'validate', '-f', file], { cwd: dir });
      expect(result.stderr).toMatch(new RegExp(`^cutover: reading ${file}: ${cause}\\n$`));
      expect(result.code).toBe(1);
    }
  });
});

describe('cutover topology plan', () => {
  async function pair(): Promise<{ dir: string; before: string; after: string }> {
    const dir = await workdir();
    const before = path.join(dir, 'before.yaml');
    const after = path.join(dir, 'after.yaml');
    const doc = shopDoc();
    await writeFile(before, toYaml(doc));
    const changed = clone(doc);
    changed.components.api = { ...changed.components.api, version: '2.1.0' };
    await writeFile(after, toYaml(changed));
    return { dir, before, after };
  }

  it('distinguishes no changes from changes with --detailed-exitcode', async () => {
    const { before, after } = await pair();
    const same = await runCli(['topology', 'plan', '-f', before, '--against', before, '--detailed-exitcode']);
    expect(same.code).toBe(0);
    expect(same.stdout).toContain('No changes.');
    const changed = await runCli([
      'topology',
      'plan',
      '-f',
      after,
      '--against',
      before,
      '--detailed-exitcode',
    ]);
    expect(changed.code).toBe(2);
    expect(changed.stdout).toContain('Plan: 0 to add, 2 to change, 0 to remove; 9 actions.');
    const plain = await runCli(['topology', 'plan', '-f', after, '--against', before]);
    expect(plain.code).toBe(0);
  });

  it('prints byte-identical JSON on every run, and writes --out atomically', async () => {
    const { dir, before, after } = await pair();
    const a = await runCli(['topology', 'plan', '-f', after, '--against', before, '--format', 'json']);
    const b = await runCli(['topology', 'plan', '-f', after, '--against', before, '--json']);
    expect(a.stdout).toBe(b.stdout);
    expect(JSON.parse(a.stdout).actions[0]).toMatchObject({
      id: 'provision_green:api',
      stage: 'provision_green',
      type: 'provision',
    });
    // --out saves a plan against the live layout (for `apply`): a plan against a file is for review.
    const out = path.join(dir, 'plan.json');
    const refused = await runCli(['topology', 'plan', '-f', after, '--against', before, '--out', out]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^cutover: --out .*plan\.json: a saved plan is planned against the live layout/,
    );
    expect(existsSync(out)).toBe(false);
    const written = await runCli(['topology', 'plan', '-f', after, '--format', 'markdown', '--out', out]);
    expect(written.code).toBe(0);
    expect(written.stdout).toMatch(/^### cutover plan for `shop`/);
    expect(written.stderr).toContain(`Saved to ${out}.`);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toMatchObject({ kind: 'cutover/SavedPlan', baseSerial: 0 });
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('plans against the recorded layout in the state directory', async () => {
    const { dir, before, after } = await pair();
    const empty = await runCli(['topology', 'plan', '-f', after, '--json']);
    expect(JSON.parse(empty.stdout).summary).toEqual({ add: 5, change: 0, remove: 0 });
    await writeCurrentLayout(StateDir.at(path.join(dir, '.cutover')), {
      environment: 'shop',
      serial: 4,
      topology: load(readFileSync(before, 'utf8')),
    });
    const recorded = JSON.parse((await runCli(['topology', 'plan', '-f', after, '--json'])).stdout);
    expect(recorded.baseSerial).toBe(4);
    expect(recorded.summary).toEqual({ add: 0, change: 2, remove: 0 });
    const elsewhere = await runCli(['topology', 'plan', '-f', after, '--json'], {
      env: { CUTOVER_STATE_DIR: path.join(dir, 'none') },
    });
    expect(JSON.parse(elsewhere.stdout).baseSerial).toBe(0);
  });

  it('plans against a Git revision for review (--against-ref)', async () => {
    const dir = await workdir();
    const git = simpleGit({ baseDir: dir });
    await git.init(['-q', '-b', 'main']);
    await git.addConfig('user.email', 'test@example.invalid').addConfig('user.name', 'test');
    await mkdir(path.join(dir, 'envs', 'shop'), { recursive: true });
    const file = path.join(dir, 'envs', 'shop', 'topology.yaml');
    const doc = shopDoc();
    await writeFile(file, toYaml(doc));
    await git.add('.').commit('base');
    const changed = clone(doc);
    changed.components.mailer = { ...changed.components.mailer, version: '1.0.0' };
    await writeFile(file, toYaml(changed));
    const result = await runCli(
      ['topology', 'plan', '-f', 'envs/shop/topology.yaml', '--against-ref', 'main', '--format', 'markdown'],
      {
        cwd: dir,
      },
    );
    expect(result.stderr).toBe('');
    expect(result.stdout).toContain('**Plan: 0 to add, 1 to change, 0 to remove; 4 actions.**');
    expect(result.stdout).toContain('version 0.9.0 → 1.0.0');

    const unknown = await runCli(['topology', 'plan', '-f', file, '--against-ref', 'no-such-branch'], {
      cwd: dir,
    });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe('cutover: unknown Git revision "no-such-branch"\n');

    const newFile = path.join(dir, 'envs', 'new.yaml');
    await writeFile(newFile, toYaml(doc));
    const added = await runCli(['topology', 'plan', '-f', newFile, '--against-ref', 'main', '--json'], {
      cwd: dir,
    });
    expect(JSON.parse(added.stdout).summary.add).toBe(5);
  });

  it('locates errors in the file at the revision', async () => {
    const dir = await workdir();
    const git = simpleGit({ baseDir: dir });
    await git.init(['-q', '-b', 'main']);
    await git.addConfig('user.email', 'test@example.invalid').addConfig('user.name', 'test');
    const doc = shopDoc();
    doc.components.api = { ...doc.components.api, replicas: -1 };
    await writeFile(path.join(dir, 'topology.yaml'), toYaml(doc));
    await git.add('.').commit('broken base');
    await writeFile(path.join(dir, 'topology.yaml'), toYaml(shopDoc()));
    const result = await runCli(['topology', 'plan', '--against-ref', 'main'], { cwd: dir });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^topology\.yaml@main:\d+:\d+ components\.api\.replicas: must be >= 1\n/);
  });

  it('refuses --against with --against-ref', async () => {
    const { before, after } = await pair();
    const result = await runCli([
      'topology',
      'plan',
      '-f',
      after,
      '--against',
      before,
      '--against-ref',
      'main',
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('cutover: --against and --against-ref cannot be used together\n');
  });

  it('names --against when the file it gives is missing (the topology itself was given)', async () => {
    const { dir, after } = await pair();
    const result = await runCli(['topology', 'plan', '-f', after, '--against', 'before-typo.yaml'], {
      cwd: dir,
    });
    expect(result.stderr).toBe(
      'cutover: before-typo.yaml: no such file (the topology to plan against, from --against FILE)\n',
    );
    expect(result.code).toBe(1);
  });
});

describe('cutover', () => {
  it('server --port out of range: one line naming the option, not an internal error', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const result = await runCli(['server', '--port', '99999', '--state-dir', path.join(dir, 'state')]);
      expect(result.stderr).toBe('cutover: --port must be an integer from 0 to 65535, not 99999\n');
      expect(result.code).toBe(1);
    } finally {
      await cleanup();
    }
  });

  // The installed binary's own output and exit codes: spawned, as a user runs it.
  it('prints its version and help with examples', async () => {
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));
    expect((await runBinary(['--version'])).stdout.trim()).toBe(pkg.version);
    for (const args of [
      ['--help'],
      ['topology', '--help'],
      ['topology', 'validate', '--help'],
      ['topology', 'plan', '--help'],
    ]) {
      const result = await runBinary(args);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/Examples?:\n\s+\$ cutover /);
    }
  });

  it('exits 1 with usage on an unknown option', async () => {
    const result = await runBinary(['topology', 'plan', '--frmat', 'json']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("unknown option '--frmat'");
  });

  it('stops quietly when its reader closes the pipe early (`… | head -1`)', async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    // A long output: the plan of a large topology as JSON, read one chunk of, then the pipe closed.
    const file = path.join(dir, 'topology.yaml');
    const doc = shopDoc();
    for (let i = 0; i < 2_000; i++)
      doc.components[`svc${i}`] = { driver: 'apps', version: '1', run: { command: ['node', 's.js'] } };
    await writeFile(file, toYaml(doc));
    const child = spawn(
      process.execPath,
      [path.join(repoRoot, 'bin', 'cutover.js'), 'topology', 'plan', '-f', file, '--json'],
      {
        env: { ...process.env, CUTOVER_STATE_DIR: path.join(dir, 'state') },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.stdout.once('data', () => child.stdout.destroy());
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});
