#!/usr/bin/env node
/**
 * What `npm test` runs before vitest, all at once: they do not depend on each other, and one after
 * the other they took about 40 s on 2 cores, most of it the type check on one core. Installs what
 * the tests need besides Node (scripts/test-deps.mjs), builds dist/ (which the tests run), type-checks
 * and lints. Each step's output is printed whole when it ends, with its time; exits 1 when any step
 * failed, naming each that did.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** name, command, arguments. */
const steps = [
  ['test-deps', process.execPath, ['scripts/test-deps.mjs']],
  ['build', npm, ['run', '--silent', 'build']],
  ['typecheck', npm, ['run', '--silent', 'typecheck']],
  ['lint', npm, ['run', '--silent', 'lint']],
];

function run([name, command, args]) {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk) => {
      output += chunk;
    });
    child.once('error', (error) => resolve({ name, ok: false, output: `${error.message}\n`, started }));
    child.once('close', (code, signal) =>
      resolve({
        name,
        ok: code === 0,
        output: code === 0 ? output : `${output}${name} exited ${signal ?? code}\n`,
        started,
      }),
    );
  }).then((result) => {
    const seconds = ((performance.now() - result.started) / 1000).toFixed(1);
    process.stdout.write(`\n> ${name} (${seconds} s, ${result.ok ? 'ok' : 'FAILED'})\n${result.output}`);
    return result;
  });
}

const results = await Promise.all(steps.map(run));
const failed = results.filter((r) => !r.ok).map((r) => r.name);
if (failed.length > 0) {
  console.error(`\nchecks failed: ${failed.join(', ')}`);
  process.exit(1);
}
