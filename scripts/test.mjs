#!/usr/bin/env node
/**
 * `npm test`: installs what the tests need besides Node (scripts/test-deps.mjs) and builds dist/
 * (which the tests run), both at once; then runs vitest, and beside it the type check and the lint,
 * which no test needs: before, the tests waited for them (about 24 s on 2 cores, the type check on
 * one core). They run as idle work (Linux's SCHED_IDLE through `chrt --idle`, else nice 19), so
 * they take only what the test files leave of the cores: at nice 10, stateful-postgres's first
 * switch, among the first files and beside them, ran past its write-hold budget twice (ci53, ci54,
 * with other load on the machine too). Each step's output is printed whole when it ends, with its
 * time; exits 1 when any step or test failed, naming each step that did. Arguments go to vitest
 * (`npm test -- test/cli.test.ts`).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const vitest = fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url));

/** Runs one step with its output captured; prints it when the step ends. */
function step(name, command, args) {
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
    child.once('error', (error) => resolve({ ok: false, output: `${error.message}\n` }));
    child.once('close', (code, signal) =>
      resolve({
        ok: code === 0,
        output: code === 0 ? output : `${output}${name} exited ${signal ?? code}\n`,
      }),
    );
  }).then(({ ok, output }) => {
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    process.stdout.write(`\n> ${name} (${seconds} s, ${ok ? 'ok' : 'FAILED'})\n${output}`);
    return { name, ok };
  });
}

/** `command args` as idle work: SCHED_IDLE with `chrt` (util-linux) when there is one, else nice 19. */
function idle(command, args) {
  const chrt = ['/usr/bin/chrt', '/bin/chrt'].find((file) => existsSync(file));
  return chrt ? [chrt, ['--idle', '0', command, ...args]] : ['nice', ['-n', '19', command, ...args]];
}

/** The exit code of vitest, its output going straight to ours. */
function runVitest(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [vitest, 'run', ...args], { cwd: root, stdio: 'inherit' });
    child.once('error', (error) => {
      console.error(`vitest could not be started: ${error.message}`);
      resolve(1);
    });
    child.once('close', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

const first = await Promise.all([
  step('test-deps', process.execPath, ['scripts/test-deps.mjs']),
  step('build', npm, ['run', '--silent', 'build']),
]);
const notReady = first.filter((r) => !r.ok).map((r) => r.name);
if (notReady.length > 0) {
  console.error(`\n${notReady.join(' and ')} failed: the tests were not run`);
  process.exit(1);
}

const [testsCode, ...checks] = await Promise.all([
  runVitest(process.argv.slice(2)),
  step('typecheck', ...idle(npm, ['run', '--silent', 'typecheck'])),
  step('lint', ...idle(npm, ['run', '--silent', 'lint'])),
]);
const failed = checks.filter((r) => !r.ok).map((r) => r.name);
if (failed.length > 0) console.error(`\nchecks failed: ${failed.join(', ')}`);
process.exit(testsCode !== 0 || failed.length > 0 ? 1 : 0);
