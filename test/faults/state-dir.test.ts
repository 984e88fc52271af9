/**
 * Issue 16, items 6–8: a full or read-only state directory, damaged claims, damaged journals. The
 * CLI on test/fixtures/slow-exec; injected faults (test/fixtures/preload/fault-fs.mjs) in this
 * process (`InProcessFaults`), or real ones where only a process shows them: a SIGTERM, a SIGKILL
 * (the preload inject-fault.mjs), a tmpfs mounted read-only or filled up (where this machine
 * allows mounting). The commands around them run in this process too (`Sandbox.inProcess`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import type { Sandbox } from '../e2e/harness.js';
import {
  baseFile,
  baseTemplate,
  errorLines,
  InProcessFaults,
  listAll,
  migrateArgs,
  preload,
  processState,
  recover,
  runWithFault,
  sandboxFrom,
  scriptsWithoutPause,
  targetFile,
  tempFiles,
} from './support.js';

let template: Sandbox;
let baseId: string;
let restoreEnv: () => void;
let inProcess: InProcessFaults;
let processBefore: ReturnType<typeof processState>;
beforeAll(async () => {
  processBefore = processState();
  restoreEnv = scriptsWithoutPause();
  inProcess = await InProcessFaults.install();
  ({ template, baseId } = await baseTemplate());
}, 30_000);
afterAll(async () => {
  inProcess?.uninstall();
  restoreEnv?.();
  await template?.cleanup();
  expect(processState(), 'the in-process commands changed the test process').toEqual(processBefore);
});

/**
 * The tests run at once (each in a sandbox of its own: most of a test is waiting on the processes
 * it started), so each cleans up only what it made, when it ends: the processes first (a runner
 * still ending keeps a mount of its state directory busy, and the directory could then not be
 * removed), then its mounts, then its directories.
 */
interface Made {
  sandbox(): Promise<Sandbox>;
  /** Unmounted when the test ends. */
  mounted(dir: string): void;
}

function made(context: TestContext): Made {
  const sandboxes: Sandbox[] = [];
  const unmounts: string[] = [];
  context.onTestFinished(async () => {
    for (const sb of sandboxes) await sb.stop();
    for (const dir of unmounts) spawnSync('umount', [dir]);
    for (const sb of sandboxes) await sb.cleanup();
  });
  return {
    async sandbox() {
      const sb = await sandboxFrom(template);
      sandboxes.push(sb);
      return sb;
    },
    mounted: (dir) => unmounts.push(dir),
  };
}

const env = (sb: Sandbox) => path.join(sb.stateDir, 'environments', 'crash');

/**
 * A minute a test: several run two whole migrations, in this process beside the others of the
 * file (one thread); at a load of 30 on 2 cores one took 34 s (20–24 s before, as real processes).
 */
describe.concurrent('a full or read-only state directory (item 6)', { timeout: 60_000 }, () => {
  it('a claim that cannot be released at the end does not keep migrate running: it ends, and the claim is stale', async (context) => {
    const sb = await made(context).sandbox();
    // The disk fills up as the migration ends: taking the claim's lock is refused.
    const run = await inProcess.run(sb, migrateArgs, {
      op: ['open', 'symlink'],
      path: 'active\\.json\\.lock',
      nth: 1,
      fault: 'ENOSPC',
    });
    expect(run.fired).not.toBe('');
    expect({ timedOut: run.timedOut, code: run.code }).toEqual({ timedOut: false, code: 0 });
    expect(run.stdout).toMatch(/: completed$/m);
    expect(errorLines(run.stderr)).toMatchObject({ trace: false, internal: false });
    expect(run.stderr).toMatch(/could not remove .*active\.json; it is stale now that mig_\w+ has ended/);
    // The next migration replaces the stale claim.
    const back = await sb.inProcess(['topology', 'migrate', '-f', baseFile, '--yes']);
    expect({ code: back.code, stderr: back.stderr }).toMatchObject({ code: 0 });
  });

  it('a journal that cannot be appended to mid-run: migrate ends with one line naming the journal and resume, and resume finishes it', async (context) => {
    const sb = await made(context).sandbox();
    const run = await inProcess.run(sb, migrateArgs, {
      op: 'write',
      path: 'journal\\.ndjson$',
      nth: 6,
      fault: 'ENOSPC',
    });
    expect(run.fired).not.toBe('');
    expect(run.timedOut).toBe(false);
    expect(run.code).toBe(1);
    const errors = errorLines(run.stderr);
    expect(errors).toMatchObject({ trace: false, internal: false });
    expect(errors.lines).toHaveLength(1);
    expect(errors.lines[0]).toMatch(
      /^cutover: mig_\w+ stopped, still in flight: appending to \/.*\/journal\.ndjson: no space left on the device \(ENOSPC\); .*`cutover topology migration resume mig_\w+`/,
    );
    expect(tempFiles(sb.stateDir)).toEqual([]);
    const seen = await recover(sb, baseId);
    expect(sb.layout().slots.a?.version, seen.join('\n')).toBe('2');
  });

  it('SIGTERM on a full disk: migrate says in one line that no background runner could take over, and resume picks it up', async (context) => {
    const sb = await made(context).sandbox();
    const { child, done } = sb.start(
      migrateArgs,
      { SLOW_MS: 3000, SLOW_ONLY: 'drain:c' },
      {
        env: {
          CUTOVER_TEST_FAULT: JSON.stringify({ op: 'open', path: 'runner\\.out$', nth: 1, fault: 'ENOSPC' }),
        },
        nodeArgs: ['--import', preload],
      },
    );
    const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
    const deadline = Date.now() + 30_000;
    while (!sb.calls().some((c) => c.stage === 'drain' && c.phase === 'start') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill('SIGTERM');
    const result = await done;
    clearTimeout(timer);
    expect(result.signal).toBeNull();
    expect(result.code).toBe(1);
    const errors = errorLines(result.stderr);
    expect(errors, result.stderr).toMatchObject({ trace: false, internal: false });
    expect(errors.lines).toEqual([
      expect.stringMatching(
        /^cutover: interrupted, and no background runner could take mig_\w+ over: open \/.*\/runner\.out: no space left on the device \(ENOSPC\); .*`cutover topology migration resume mig_\w+` picks it up$/,
      ),
    ]);
    const seen = await recover(sb, baseId);
    expect(sb.layout().slots.a?.version, seen.join('\n')).toBe('2');
  });

  it.for([
    ['ENOSPC', 'no space left on the device'],
    ['EACCES', 'permission denied'],
  ] as const)(
    '%s on the claim at start: one line naming the state directory, exit 1, no temp file',
    async ([fault, cause], context) => {
      const sb = await made(context).sandbox();
      const run = await inProcess.run(sb, migrateArgs, {
        op: 'write',
        path: 'active\\.json\\.\\d+\\..*\\.tmp$',
        nth: 1,
        fault,
      });
      expect(run.fired).not.toBe('');
      expect(run.code).toBe(1);
      const errors = errorLines(run.stderr);
      expect(errors).toMatchObject({ trace: false, internal: false });
      expect(errors.lines).toEqual([
        expect.stringMatching(
          new RegExp(
            `^cutover: claiming environment crash in the state directory ${sb.stateDir}: ${cause} \\(${fault}\\); `,
          ),
        ),
      ]);
      expect(tempFiles(sb.stateDir)).toEqual([]);
    },
  );

  it("the claim is fsync'd before it is linked into place", async (context) => {
    const sb = await made(context).sandbox();
    const run = await inProcess.run(sb, migrateArgs, {
      op: 'fsync',
      path: 'active\\.json\\.\\d+\\..*\\.tmp$',
      nth: 1,
      fault: 'ENOSPC',
    });
    expect(run.fired).toMatch(/ENOSPC fsync .*active\.json\./);
    expect(run.code).toBe(1);
    expect(tempFiles(sb.stateDir)).toEqual([]);
  });

  /**
   * A real tmpfs needs root and mount(8) (as on the CI machine, where `npm test` runs as root): a
   * test that cannot mount fails saying so; it is never skipped.
   */
  function mustMount(): void {
    const canMount = process.getuid?.() === 0 && spawnSync('mount', ['--version']).status === 0;
    if (!canMount) throw new Error('this test mounts a tmpfs: run it as root, with mount(8) on the PATH');
  }

  it('a real read-only state directory at start: one line naming it, exit 1', async (context) => {
    mustMount();
    const test = made(context);
    const sb = await test.sandbox();
    const dir = path.join(sb.dir, 'readonly-state');
    mkdirSync(dir);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', dir]);
    test.mounted(dir);
    const { child, done } = sb.start(migrateArgs, {}, { env: { CUTOVER_STATE_DIR: dir } });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const result = await done;
    clearTimeout(timer);
    expect(result.code).toBe(1);
    const errors = errorLines(result.stderr);
    expect(errors).toMatchObject({ trace: false, internal: false });
    expect(errors.lines).toEqual([
      expect.stringMatching(
        new RegExp(`^cutover: .*${dir}.*read-only \\(EROFS\\); use a writable directory$`),
      ),
    ]);
  });

  it('a real full disk in the middle of a migration: migrate ends by itself with one line, and the migration finishes once there is space', async (context) => {
    mustMount();
    const test = made(context);
    const sb = await test.sandbox();
    // The state directory on a small tmpfs of its own, holding the base layout.
    const state = sb.stateDir;
    const saved = path.join(sb.dir, 'saved-state');
    execFileSync('cp', ['-a', state, saved]);
    rmSync(state, { recursive: true });
    mkdirSync(state);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', state]);
    test.mounted(state);
    execFileSync('cp', ['-a', `${saved}/.`, state]);
    // drain of c is slow: the disk is filled while it runs, and the rest runs on a full disk.
    const { child, done } = sb.start(migrateArgs, { SLOW_MS: 1500, SLOW_ONLY: 'drain:c' });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const filler = path.join(state, 'filler');
    const started = Date.now();
    while (
      !sb.calls().some((c) => c.stage === 'drain' && c.phase === 'start') &&
      Date.now() - started < 30_000
    ) {
      await new Promise((r) => setTimeout(r, 20));
    }
    spawnSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k'], { stdio: 'ignore' });
    const result = await done;
    clearTimeout(timer);
    expect(result.signal, 'migrate was killed after 60 s: it did not end by itself').toBeNull();
    const errors = errorLines(result.stderr);
    expect(errors, result.stderr).toMatchObject({ trace: false, internal: false });
    // The full disk was met (the commit's layout write, the journal), and said so.
    expect(result.stderr).toMatch(/no space left on the device \(ENOSPC\)/);
    if (result.code !== 0) {
      expect(result.code).toBe(1);
      expect(errors.lines, result.stderr).toEqual([
        expect.stringMatching(new RegExp(`^cutover: mig_\\w+ .*${state}/.*\\(ENOSPC\\); .*resume mig_\\w+`)),
      ]);
    }
    expect(tempFiles(state)).toEqual([]);
    rmSync(filler);
    const listed = await listAll(sb);
    expect(listed.code).toBe(0);
    const seen = await recover(sb, baseId);
    expect(sb.layout().slots.c?.version, seen.join('\n')).toBe('2');
  }, 120_000);
});

describe.concurrent('claims (item 7)', () => {
  it.for([
    ['empty', ''],
    ['unparsable', '{"migrationId": "mig_0'],
  ] as const)(
    'an %s active.json with nothing in flight is replaced, with a notice',
    async ([, content], context) => {
      const sb = await made(context).sandbox();
      writeFileSync(path.join(env(sb), 'active.json'), content);
      const run = await sb.inProcess(migrateArgs);
      expect(run.stderr).toMatch(
        /^cutover: .*active\.json could not be read \(.*\) and no migration of crash is in flight: replaced it$/m,
      );
      expect({ code: run.code, out: run.stdout.trim() }).toMatchObject({ code: 0 });
      expect(run.stdout).toMatch(/: completed$/m);
    },
  );

  it('an unreadable active.json while a migration is in flight names that migration', async (context) => {
    const sb = await made(context).sandbox();
    // A migration in flight whose runner died (SIGKILL right after its third journal line).
    const killed = await runWithFault(sb, migrateArgs, {
      op: 'fsync',
      path: 'journal\\.ndjson$',
      nth: 3,
      fault: 'SIGKILL',
    });
    expect(killed.signal).toBe('SIGKILL');
    const inFlight = (await listAll(sb)).list.find((m) => m.id !== baseId);
    writeFileSync(path.join(env(sb), 'active.json'), '');
    const run = await sb.inProcess(migrateArgs);
    expect(run.code).toBe(1);
    expect(errorLines(run.stderr).lines).toEqual([
      expect.stringContaining(`environment crash already has a migration in flight: ${inFlight?.id}`),
    ]);
    expect(run.stderr).toContain(`cutover topology migration resume ${inFlight?.id}`);
  });
});

describe.concurrent('journals (item 8)', () => {
  it('one damaged journal: list shows the others and marks that one unreadable, naming its file', async (context) => {
    const sb = await made(context).sandbox();
    const done = await sb.inProcess(migrateArgs);
    expect(done.code).toBe(0);
    const journal = sb.journalFile(baseId);
    const lines = readFileSync(journal, 'utf8').split('\n');
    lines[2] = '{"type": "command_succ';
    writeFileSync(journal, lines.join('\n'));
    const table = await sb.inProcess(['topology', 'migration', 'list', '-f', targetFile]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/completed/);
    expect(table.stdout).toMatch(new RegExp(`${baseId}\\s+crash\\s+unreadable`));
    expect(table.stderr).toContain(
      `cutover: ${baseId} is unreadable: ${journal}:3: journal line is not valid JSON`,
    );
    const listed = await listAll(sb);
    expect(listed.list.map((m) => m.status).sort()).toEqual(['completed', 'unreadable']);
    const show = await sb.inProcess(['topology', 'migration', 'show', baseId, '-f', targetFile]);
    expect({ code: show.code, errors: errorLines(show.stderr).lines }).toEqual({
      code: 1,
      errors: [expect.stringContaining(`${journal}:3: journal line is not valid JSON`)],
    });
  });

  it('a journal without its first line names the file, is not an internal error, and blocks nothing', async (context) => {
    const sb = await made(context).sandbox();
    const id = 'mig_01jzzzzzzzzzzzzzzzzzzzzzzz';
    mkdirSync(sb.migrationDir(id), { recursive: true });
    writeFileSync(sb.journalFile(id), '');
    const show = await sb.inProcess(['topology', 'migration', 'show', id, '-f', targetFile]);
    expect(show.code).toBe(1);
    expect(errorLines(show.stderr)).toEqual({
      lines: [
        `cutover: ${sb.journalFile(id)}: the journal is empty: the migration was interrupted while being created and never ran; remove ${sb.migrationDir(id)}`,
      ],
      trace: false,
      internal: false,
    });
    // A claim left by the dead process that was creating it: stale.
    const dead = spawnSync(process.execPath, ['-e', '0']).pid as number;
    writeFileSync(
      path.join(env(sb), 'active.json'),
      JSON.stringify({ migrationId: id, claimedAt: 0, claimedBy: { pid: dead, startTime: null } }),
    );
    const run = await sb.inProcess(migrateArgs);
    expect({ code: run.code, errors: errorLines(run.stderr).lines }).toEqual({ code: 0, errors: [] });
  });
});
