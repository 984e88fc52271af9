/**
 * Shared by the fault-injection tests: the CLI run with one file-system call failing with a real
 * errno error, or the process SIGKILLed right after it — in this process (`InProcessFaults`: the
 * CLI's `main` with test/fixtures/preload/fault-fs.mjs wrapping node:fs here, the fault scoped to
 * the sandbox's directory) or as a real process (`runWithFault`: the compiled CLI with the preload
 * test/fixtures/preload/inject-fault.mjs; the only way to SIGKILL it, and the process boundary
 * tested) — on a sandbox of test/e2e/harness.ts whose state holds the base layout of
 * test/fixtures/slow-exec; and the checks that every fault must pass: a clear end, nothing left
 * half-written, nothing lost.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { baseFile, type CliResult, Sandbox, targetFile } from '../e2e/harness.js';
import { type FaultFs, installFaultFs } from '../fixtures/preload/fault-fs.mjs';
import { repoRoot } from '../support/cli.js';
import { listenersOf } from '../support/process-state.js';

export const preload = path.join(repoRoot, 'test', 'fixtures', 'preload', 'inject-fault.mjs');

/**
 * The fixture's scripts of a command run in this process, and of a runner that `resume` starts
 * from it (`recover`, in-process commands), run without a pause, as in every command of a
 * sandbox: both get this process's environment, not the command's (the exec driver's
 * `inheritedEnv()`, engine/services/migrations.ts `runnerEnv`), so the knobs of
 * `Sandbox.inProcess` do not reach them; without SLOW_MS the scripts sleep 300 ms a call
 * (test/fixtures/slow-exec/infra/lib.sh): about 6 s of every recovery was those pauses.
 * Returns what puts the environment back (a file's afterAll: nothing of it outlives the file).
 */
export function scriptsWithoutPause(): () => void {
  const before = process.env.SLOW_MS;
  process.env.SLOW_MS ??= '0';
  return () => {
    if (before === undefined) delete process.env.SLOW_MS;
    else process.env.SLOW_MS = before;
  };
}

export type FaultKind = 'ENOSPC' | 'EACCES' | 'SIGKILL';
export type FaultOp =
  | 'open'
  | 'write'
  | 'fsync'
  | 'truncate'
  | 'link'
  | 'rename'
  | 'mkdir'
  | 'unlink'
  | 'symlink';

export interface Fault {
  /** One op, or several counted together. */
  op: FaultOp | FaultOp[];
  /** A regular expression the call's file must match. */
  path: string;
  nth: number;
  fault: FaultKind;
}

export interface FaultRun extends CliResult {
  /** What the preload says it did (empty when the site was never reached). */
  fired: string;
  timedOut: boolean;
}

/** Longest a faulted command may take: it must end, and a hang is what we look for. */
export const faultRunTimeoutMs = 45_000;

export async function runWithFault(sb: Sandbox, args: string[], fault: Fault): Promise<FaultRun> {
  const firedFile = path.join(sb.dir, `fired-${Date.now()}`);
  const { child, done } = sb.start(
    args,
    {},
    {
      env: { CUTOVER_TEST_FAULT: JSON.stringify(fault), CUTOVER_TEST_FAULT_FIRED: firedFile },
      nodeArgs: ['--import', preload],
    },
  );
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, faultRunTimeoutMs);
  try {
    const result = await done;
    const fired = existsSync(firedFile) ? readFileSync(firedFile, 'utf8') : '';
    return { ...result, fired, timedOut };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What the commands a file runs in this process must leave of it as they found it: its directory,
 * umask, environment and the listeners a command may add. runCli checks one command run alone;
 * this is compared at the end of a file whose cases run at once (a leak there is not seen per run).
 */
export function processState(): Record<string, unknown> {
  const umask = /^Umask:\s*(\d+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  const events = [
    'SIGINT',
    'SIGTERM',
    'SIGHUP',
    'exit',
    'beforeExit',
    'uncaughtException',
    'unhandledRejection',
  ];
  return {
    cwd: process.cwd(),
    umask,
    env: { ...process.env },
    // Less on-exit-leak-free's (pino's) listener, which the library takes away itself when the
    // streams of an earlier file's server are collected: ci40 saw it go during this file.
    listeners: Object.fromEntries(events.map((e) => [e, listenersOf(e).length])),
  };
}

/**
 * Faults injected into commands run in this process (`Sandbox.inProcess`): node:fs wrapped once
 * for the file (`installFaultFs`, taken off by `uninstall` in its afterAll), each fault counted
 * only on the files of its own sandbox, so that cases running at once do not see each other's
 * calls. What a case checks is what `runWithFault` gives of a real process, without a Node start
 * per case. A SIGKILL needs a process to kill: those cases use `runWithFault`.
 */
export class InProcessFaults {
  private constructor(private readonly faults: FaultFs) {}

  static async install(): Promise<InProcessFaults> {
    return new InProcessFaults(await installFaultFs());
  }

  async run(sb: Sandbox, args: string[], fault: Fault & { fault: 'ENOSPC' | 'EACCES' }): Promise<FaultRun> {
    let fired = '';
    const entry = this.faults.add({
      ...fault,
      within: `${sb.dir}${path.sep}`,
      onFire: (line) => {
        fired += line;
      },
    });
    let timer: NodeJS.Timeout | undefined;
    const hang = new Promise<'hang'>((resolve) => {
      timer = setTimeout(() => resolve('hang'), faultRunTimeoutMs);
    });
    try {
      const result = await Promise.race([sb.inProcess(args), hang]);
      if (result === 'hang')
        return { code: null, signal: null, stdout: '', stderr: '', fired, timedOut: true };
      return { ...result, fired, timedOut: false };
    } finally {
      clearTimeout(timer);
      this.faults.remove(entry);
    }
  }

  uninstall(): void {
    this.faults.uninstall();
  }
}

/** A template sandbox at the base layout (base.yaml migrated), copied for each case. */
export async function baseTemplate(): Promise<{ template: Sandbox; baseId: string }> {
  const template = await Sandbox.create();
  const baseId = await template.migrateBase();
  return { template, baseId };
}

export async function sandboxFrom(template: Sandbox): Promise<Sandbox> {
  const sb = await Sandbox.create();
  sb.copyStateFrom(template.stateDir);
  return sb;
}

/**
 * `cutover topology migrate -f topology.yaml --yes` (foreground: every write is in one process).
 * Frozen: one array for every faults file a process runs (the callers take a `string[]`).
 */
export const migrateArgs = Object.freeze(['topology', 'migrate', '-f', targetFile, '--yes']) as string[];
export { baseFile, targetFile };

/** Every file under the state directory whose name ends in .tmp (a write left half done). */
export function tempFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.tmp')) out.push(full);
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

/** The lines the CLI printed that report an error (`cutover: …`), and whether it showed a trace. */
export function errorLines(stderr: string): { lines: string[]; trace: boolean; internal: boolean } {
  const lines = stderr.split('\n').filter((l) => l.startsWith('cutover:'));
  return {
    lines,
    trace: /^\s+at .+:\d+:\d+\)?$/m.test(stderr),
    internal: /internal error|invariant violated|a bug in cutover/.test(stderr),
  };
}

export interface ListedMigration {
  id: string;
  lifecycle: string;
  status: string;
  unreadable?: string;
}

export async function listAll(
  sb: Sandbox,
): Promise<{ code: number | null; list: ListedMigration[]; stderr: string }> {
  const r = await sb.inProcess(['topology', 'migration', 'list', '--all', '--json', '-f', targetFile]);
  return {
    code: r.code,
    list: r.code === 0 ? (JSON.parse(r.stdout) as { items: ListedMigration[] }).items : [],
    stderr: r.stderr,
  };
}

export const finalLifecycles: readonly string[] = ['completed', 'rolled_back', 'cancelled', 'failed'];

/**
 * Brings the environment to the target layout the way an operator would: resume the migration
 * left in flight (if any) and follow its log until it ends, then migrate again if the target is not
 * live yet. `listedBefore`: a `listAll` the caller has just made (saves a CLI run). Returns what
 * the operator saw at each step, for the failure message. These commands, and `listAll`, run
 * in-process (`Sandbox.inProcess`): the faulted command is the real process (`runWithFault`); what
 * follows it checks what it left, through the same commands without a Node start each.
 */
export async function recover(
  sb: Sandbox,
  baseId: string,
  listedBefore?: Awaited<ReturnType<typeof listAll>>,
): Promise<string[]> {
  const seen: string[] = [];
  const listed = listedBefore ?? (await listAll(sb));
  seen.push(`list: exit ${listed.code} ${listed.stderr.trim()}`);
  const inFlight = listed.list.find((m) => m.id !== baseId && !finalLifecycles.includes(m.lifecycle));
  if (inFlight) {
    const r = await sb.inProcess(['topology', 'migration', 'resume', inFlight.id, '-f', targetFile]);
    seen.push(`resume ${inFlight.id}: exit ${r.code} ${r.stderr.trim()}`);
    // Followed to its end as an operator would (one process, not a poll of `show`); the loop
    // below then only confirms the end, or waits on if the follow stopped early.
    const followed = await sb.inProcess([
      'topology',
      'migration',
      'logs',
      inFlight.id,
      '-f',
      targetFile,
      '--follow',
    ]);
    seen.push(`logs --follow: exit ${followed.code} ${followed.stderr.trim().split('\n').at(-1) ?? ''}`);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const s = await sb.inProcess([
        'topology',
        'migration',
        'show',
        inFlight.id,
        '-f',
        targetFile,
        '--json',
      ]);
      const lifecycle =
        s.code === 0 ? (JSON.parse(s.stdout) as { summary: ListedMigration }).summary.lifecycle : '';
      if (finalLifecycles.includes(lifecycle)) {
        seen.push(`${inFlight.id} ended ${lifecycle}`);
        break;
      }
      if (Date.now() > deadline)
        throw new Error(`${inFlight.id} did not end after resume: ${seen.join(' | ')}`);
      await sleep(100);
    }
  }
  const layout = sb.layout();
  if (!Object.values(layout.slots).every((slot) => slot.version === '2')) {
    const r = await sb.inProcess(migrateArgs);
    seen.push(
      `migrate again: exit ${r.code} ${r.stdout.trim()} ${r.stderr
        .split('\n')
        .filter((l) => l.startsWith('cutover:'))
        .join(' ')}`,
    );
  }
  return seen;
}
