#!/usr/bin/env node
// `npm run demo`: a tour of what cutover does today, using the real CLI on the examples.
// It validates every example topology, shows a file with mistakes, and plans each kind of change.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const bin = path.join(root, 'bin', 'cutover.js');
const bold = (s) => (process.stdout.isTTY && !process.env.NO_COLOR ? `\u001b[1m${s}\u001b[22m` : s);

function cutover(args, { expect = [0], cwd = root, env = {} } = {}) {
  const shown = Object.entries(env)
    .map(([k, v]) => `${k}=${v} `)
    .join('');
  process.stdout.write(`\n${bold(`$ ${shown}cutover ${args.join(' ')}`)}\n`);
  const result = spawnSync(process.execPath, [bin, ...args], {
    cwd,
    stdio: 'inherit',
    env: { ...process.env, ...env },
  });
  if (!expect.includes(result.status)) {
    process.stderr.write(`demo: cutover exited ${result.status}, expected ${expect.join(' or ')}\n`);
    process.exit(1);
  }
}

console.log(bold('1. Validate the example topologies'));
for (const name of ['web-app', 'multi-service', 'stepped-manual']) {
  cutover(['topology', 'validate', '-f', `examples/${name}/topology.yaml`]);
}

console.log(`\n${bold('2. A topology with mistakes: every problem, located')}`);
cutover(['topology', 'validate', '-f', 'examples/broken/topology.yaml'], { expect: [1] });

console.log(`\n${bold('3. Plans for each kind of change, as a reviewer reads them')}`);
const changes = readdirSync(path.join(root, 'examples', 'changes')).sort();
for (const change of changes) {
  const dir = `examples/changes/${change}`;
  cutover(
    ['topology', 'plan', '-f', `${dir}/after.yaml`, '--against', `${dir}/before.yaml`, '--detailed-exitcode'],
    {
      expect: [0, 2],
    },
  );
}

console.log(`\n${bold('4. The same plan as a pull-request comment (markdown)')}`);
cutover([
  'topology',
  'plan',
  '-f',
  'examples/changes/version-bump/after.yaml',
  '--against',
  'examples/changes/version-bump/before.yaml',
  '--format',
  'markdown',
]);

console.log(`\n${bold('5. Migrations: the exec example, in a scratch copy')}`);
const scratch = mkdtempSync(path.join(tmpdir(), 'cutover-demo-'));
try {
  cpSync(path.join(root, 'examples', 'exec-demo'), scratch, { recursive: true });
  const topology = path.join(scratch, 'topology.yaml');
  cutover(['topology', 'migrate', '-f', topology, '--yes'], { cwd: scratch });
  writeFileSync(
    topology,
    readFileSync(topology, 'utf8').replace('version: "1" # change it', 'version: "2" # change it'),
  );
  console.log(
    '\n(db is now at version 2 in the file: db is replaced, and api with it, because it depends on db)',
  );
  cutover(['topology', 'migrate', '-f', topology, '--yes'], { cwd: scratch });
  writeFileSync(
    topology,
    readFileSync(topology, 'utf8').replace('version: "2" # change it', 'version: "3" # change it'),
  );
  console.log(
    '\n(version 3 with an unhealthy api: the health gate fails and the migration rolls back by itself)',
  );
  cutover(['topology', 'migrate', '-f', topology, '--yes'], {
    cwd: scratch,
    env: { DEMO_UNHEALTHY: '1' },
    expect: [1],
  });
  cutover(['topology', 'migration', 'list', '-f', topology], { cwd: scratch });
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

console.log(`\n${bold('Done.')} Next: cutover topology plan --help, and README.md.`);
