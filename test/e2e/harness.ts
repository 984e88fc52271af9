/**
 * Shared by the end-to-end tests of the local mode: a sandbox per test (a temp state directory, the
 * real CLI in child processes it tracks, cleanup that kills by pid everything the test started,
 * detached runners included), and readers for what a migration leaves on disk (journal, layout,
 * runner record, and the calls.log and slot markers of test/fixtures/slow-exec).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { repoRoot, runCli, tempDir } from '../support/cli.js';

export const fixtureDir = path.join(repoRoot, 'test', 'fixtures', 'slow-exec');
/** Every component at version "1": the layout live before a test's migration. */
export const baseFile = path.join(fixtureDir, 'base.yaml');
/** Every component at version "2": a replaced (stateful: replicated), b and c through dependsOn. */
export const targetFile = path.join(fixtureDir, 'topology.yaml');
export const environment = 'crash';
export const components = ['a', 'b', 'c'] as const;
const bin = path.join(repoRoot, 'bin', 'cutover.js');

export const finalLifecycles: readonly string[] = ['completed', 'rolled_back', 'cancelled', 'failed'];

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The knobs of the fixture scripts (test/fixtures/slow-exec/infra/lib.sh). */
export interface Knobs {
  SLOW_MS?: number;
  SLOW_ONLY?: string;
  OTHER_MS?: number;
  CRASH_UNHEALTHY?: string;
}

export interface RunnerRecord {
  migrationId: string;
  port: number;
  token: string;
  process: { pid: number; startTime: string | null };
}

export interface Layout {
  serial: number;
  migrationId?: string;
  slots: Record<string, { version: string; details?: { slotId?: string } }>;
}

export interface Call {
  phase: 'start' | 'end';
  stage: string;
  component: string;
  slot: string;
  slotId: string;
  pid: number;
  status?: number;
}

/** A test's world: a state directory of its own, and every process started for it. */
export class Sandbox {
  readonly stateDir: string;
  private readonly children = new Set<ChildProcess>();

  private constructor(
    readonly dir: string,
    private readonly removeDir: () => Promise<void>,
  ) {
    this.stateDir = path.join(dir, 'state');
  }

  static async create(): Promise<Sandbox> {
    const { dir, cleanup } = await tempDir('cutover-e2e-');
    return new Sandbox(dir, cleanup);
  }

  /** Starts the CLI with this sandbox's state directory and the given script knobs. */
  start(
    args: string[],
    knobs: Knobs = {},
    extra: { env?: NodeJS.ProcessEnv; nodeArgs?: string[] } = {},
  ): { child: ChildProcess; done: Promise<CliResult> } {
    const env: NodeJS.ProcessEnv = { ...process.env, ...this.env(knobs), ...extra.env };
    const child = spawn(process.execPath, [...(extra.nodeArgs ?? []), bin, ...args], {
      cwd: this.dir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const done = new Promise<CliResult>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code, signal) => {
        this.children.delete(child);
        resolve({ code, signal, stdout, stderr });
      });
    });
    return { child, done };
  }

  /** This sandbox's state directory and the script knobs, as the CLI's environment. */
  private env(knobs: Knobs): NodeJS.ProcessEnv {
    return {
      NO_COLOR: '1',
      CUTOVER_STATE_DIR: this.stateDir,
      SLOW_MS: String(knobs.SLOW_MS ?? 0),
      SLOW_ONLY: knobs.SLOW_ONLY ?? '',
      OTHER_MS: String(knobs.OTHER_MS ?? 0),
      CRASH_UNHEALTHY: knobs.CRASH_UNHEALTHY ?? '',
    };
  }

  /**
   * Runs the CLI in this process (test/support/cli.ts `runCli`), in this sandbox's directory with
   * its state directory and knobs: for the commands whose own process is not what a test looks at
   * (list, show, logs, resume, a migrate that is not faulted), without a Node start each. A
   * migration's runner it starts is a real process, killed by `cleanup`.
   */
  async inProcess(args: string[], knobs: Knobs = {}): Promise<CliResult> {
    return { ...(await runCli(args, { cwd: this.dir, env: this.env(knobs) })), signal: null };
  }

  /** Runs the CLI to its end (bounded). */
  async cli(args: string[], knobs: Knobs = {}, timeoutMs = 30_000): Promise<CliResult> {
    const { child, done } = this.start(args, knobs);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    try {
      return await done;
    } finally {
      clearTimeout(timer);
    }
  }

  /** `cutover topology migration <verb> <id> -f topology.yaml`. */
  migration(verb: string, id: string, knobs: Knobs = {}, extra: string[] = []): Promise<CliResult> {
    return this.cli(['topology', 'migration', verb, id, '-f', targetFile, ...extra], knobs);
  }

  /** Starts a detached migration of topology.yaml; resolves with its id. */
  async migrateDetached(knobs: Knobs, file = targetFile): Promise<string> {
    const result = await this.cli(['topology', 'migrate', '-f', file, '--yes', '--detach'], knobs);
    if (result.code !== 0) throw new Error(`migrate --detach exited ${result.code}: ${result.stderr}`);
    const id = result.stdout.trim();
    if (!/^mig_[0-9a-z]{26}$/.test(id)) throw new Error(`migrate --detach printed ${JSON.stringify(id)}`);
    return id;
  }

  /** Runs base.yaml to completion (fast): the live, blue layout of the tests' migrations. */
  async migrateBase(): Promise<string> {
    const result = await this.cli(['topology', 'migrate', '-f', baseFile, '--yes', '--json'], {});
    if (result.code !== 0) throw new Error(`base migrate exited ${result.code}: ${result.stderr}`);
    return (JSON.parse(result.stdout) as { summary: { id: string } }).summary.id;
  }

  /** This sandbox's state starts as a copy of another (a prepared base layout). */
  copyStateFrom(stateDir: string): void {
    cpSync(stateDir, this.stateDir, { recursive: true });
  }

  environmentDir(): string {
    return path.join(this.stateDir, 'environments', environment);
  }

  migrationDir(id: string): string {
    return path.join(this.environmentDir(), 'migrations', id);
  }

  journalFile(id: string): string {
    return path.join(this.migrationDir(id), 'journal.ndjson');
  }

  migrationIds(): string[] {
    const dir = path.join(this.environmentDir(), 'migrations');
    return existsSync(dir) ? readdirSync(dir).sort() : [];
  }

  runner(id: string): RunnerRecord | null {
    try {
      return JSON.parse(
        readFileSync(path.join(this.migrationDir(id), 'runner.json'), 'utf8'),
      ) as RunnerRecord;
    } catch {
      return null;
    }
  }

  layout(): Layout {
    return JSON.parse(readFileSync(path.join(this.environmentDir(), 'layout.json'), 'utf8')) as Layout;
  }

  /** Serials of the layout history (environments/crash/layouts/<serial>.json). */
  layoutHistory(): number[] {
    const dir = path.join(this.environmentDir(), 'layouts');
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((f) => /^\d+\.json$/.test(f))
      .map((f) => Number.parseInt(f, 10))
      .sort((x, y) => x - y);
  }

  /** Whole lines of the journal (a torn last line without a newline is not counted). */
  journalLineCount(id: string): number {
    try {
      const buffer = readFileSync(this.journalFile(id));
      let n = 0;
      for (let i = buffer.indexOf(0x0a); i !== -1; i = buffer.indexOf(0x0a, i + 1)) n++;
      return n;
    } catch {
      return 0;
    }
  }

  calls(): Call[] {
    const file = path.join(this.stateDir, 'calls.log');
    if (!existsSync(file)) return [];
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => {
        const [phase, stage, component, slot, slotId, pid, status] = line.split(' ');
        const call: Call = {
          phase: phase as Call['phase'],
          stage: stage as string,
          component: component as string,
          slot: slot as string,
          slotId: slotId as string,
          pid: Number(pid),
        };
        if (status !== undefined) call.status = Number(status);
        return call;
      });
  }

  /** Every file under a slot's marker directory, with its content: to compare before and after. */
  slotSnapshot(slotId: string): Record<string, string> {
    const root = path.join(this.stateDir, 'slots', slotId);
    const out: Record<string, string> = {};
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(full);
        else out[path.relative(root, full)] = readFileSync(full, 'utf8');
      }
    };
    if (existsSync(root)) walk(root);
    return out;
  }

  hasMarker(slotId: string, marker: string): boolean {
    return existsSync(path.join(this.stateDir, 'slots', slotId, marker));
  }

  /**
   * Kills, by pid, everything this test started: CLI children still running, the runner of every
   * migration (detached runners outlive the CLI), then fixture scripts still running (a killed
   * runner leaves its script behind, in its own process group). The directory stays.
   */
  async stop(): Promise<void> {
    for (const child of this.children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    for (const id of this.migrationIds()) {
      const record = this.runner(id);
      // A record naming this process: a runner that ran in it (a command run in-process), whose
      // record a fault kept from being removed. Never this process.
      if (record && record.process.pid !== process.pid) killRunner(record);
    }
    await sleep(50);
    killLeftoverScripts(this.calls());
  }

  /** `stop`, then removes the directory. */
  async cleanup(): Promise<void> {
    await this.stop();
    await this.removeDir();
  }
}

function killQuietly(pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** /proc/<pid>/stat from the state field on, or null when there is no such process. */
function procStat(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** Whether a pid is still the process that was recorded (a reused pid is another process). */
function sameProcess(pid: number, startTime: string | null): boolean {
  const stat = procStat(pid);
  if (!stat || stat[0] === 'Z') return false;
  return startTime === null || stat[19] === startTime;
}

/** True once the process has exited (gone, or a zombie waiting to be reaped). */
export function processExited(pid: number): boolean {
  const stat = procStat(pid);
  return stat === null || stat[0] === 'Z';
}

/** Fixture scripts that started and never recorded their end: kill their process group. */
function killLeftoverScripts(calls: Call[]): void {
  const ended = new Set(calls.filter((c) => c.phase === 'end').map((c) => c.pid));
  for (const call of calls) {
    if (call.phase !== 'start' || ended.has(call.pid)) continue;
    const stat = procStat(call.pid);
    if (!stat || stat[0] === 'Z') continue;
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${call.pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (!cmdline.includes(fixtureDir) && !cmdline.includes('./infra/')) continue;
    // pgrp is field 5 of stat (index 2 from the state field): scripts lead their own group.
    if (stat[2] === String(call.pid)) killQuietly(-call.pid);
    else killQuietly(call.pid);
  }
}

/** Polls until `probe` returns a value other than undefined, or throws after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 20_000,
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * SIGKILLs a migration's runner if it is still the recorded process (never a reused pid); false
 * when it had already exited.
 */
export function killRunner(record: RunnerRecord): boolean {
  if (!sameProcess(record.process.pid, record.process.startTime)) return false;
  process.kill(record.process.pid, 'SIGKILL');
  return true;
}

/** SIGKILLs a runner and waits until it has exited (a zombie not yet reaped counts), bounded. */
export async function killAndWait(record: RunnerRecord): Promise<void> {
  killRunner(record);
  const pid = record.process.pid;
  await waitFor(`pid ${pid} to exit`, () => (processExited(pid) ? true : undefined), 10_000);
}
