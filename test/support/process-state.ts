/**
 * What a test file may change of its process and must put back: its environment, working
 * directory, umask, listeners, exit code, fetch's global dispatcher and timers. Taken and compared
 * around each file of the integration project by test/support/process-state-setup.ts.
 */
import { vi } from 'vitest';

/** Where Node's fetch (undici) keeps its global dispatcher; `setGlobalDispatcher` replaces it. */
const dispatcherKey = Symbol.for('undici.globalDispatcher.1');

export interface ProcessState {
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  umask: number;
  /** The listeners of each process event, in order. */
  listeners: ReadonlyMap<string | symbol, readonly Listener[]>;
  exitCode: typeof process.exitCode;
  dispatcher: unknown;
  fakeTimers: boolean;
}

type Listener = (...args: unknown[]) => void;

/**
 * The listeners of a process event, less on-exit-leak-free's (pino's): one per process for every
 * log stream it flushes at exit, holding each by a weak reference, so nothing stays alive by it;
 * the library adds it with its first stream and removes it itself, and taking it away would stop
 * the flush of streams still open.
 */
export function listenersOf(event: string | symbol): Listener[] {
  return (process.rawListeners(event) as Listener[]).filter(
    (listener) =>
      !/^function on(Before)?Exit \(\) \{\s*callRefs\('(beforeE|e)xit'\)\s*\}$/.test(String(listener)),
  );
}

/** The process's state now. */
export function processState(): ProcessState {
  return {
    env: { ...process.env },
    cwd: process.cwd(),
    // Reading the umask means setting it: set back at once (Node has no read-only call).
    umask: (() => {
      const mask = process.umask(0o022);
      process.umask(mask);
      return mask;
    })(),
    listeners: new Map(process.eventNames().map((name) => [name, listenersOf(name)])),
    exitCode: process.exitCode,
    dispatcher: (globalThis as Record<symbol, unknown>)[dispatcherKey],
    fakeTimers: vi.isFakeTimers(),
  };
}

const shown = (value: string | undefined) =>
  value === undefined ? 'unset' : JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);

/** What differs from `before` in `after`, one line each (empty when nothing does). */
export function processChanges(before: ProcessState, after: ProcessState): string[] {
  const changes: string[] = [];
  const names = new Set([...Object.keys(before.env), ...Object.keys(after.env)]);
  for (const name of [...names].sort()) {
    const [was, now] = [before.env[name], after.env[name]];
    if (was !== now) changes.push(`process.env.${name}: ${shown(was)} → ${shown(now)}`);
  }
  if (before.cwd !== after.cwd) changes.push(`process.cwd(): ${before.cwd} → ${after.cwd}`);
  if (before.umask !== after.umask) {
    changes.push(
      `umask: ${before.umask.toString(8).padStart(4, '0')} → ${after.umask.toString(8).padStart(4, '0')}`,
    );
  }
  const events = new Set([...before.listeners.keys(), ...after.listeners.keys()]);
  for (const event of events) {
    const [was, now] = [before.listeners.get(event) ?? [], after.listeners.get(event) ?? []];
    const added = now.filter((listener) => !was.includes(listener)).length;
    const removed = was.filter((listener) => !now.includes(listener)).length;
    if (added > 0 || removed > 0) {
      changes.push(
        `process listeners of '${String(event)}': ${added} added, ${removed} removed (process.on without process.off)`,
      );
    }
  }
  if (before.exitCode !== after.exitCode) {
    changes.push(`process.exitCode: ${String(before.exitCode)} → ${String(after.exitCode)}`);
  }
  // fetch makes its dispatcher at its first call: only a replaced one is a change.
  if (before.dispatcher !== undefined && before.dispatcher !== after.dispatcher) {
    changes.push("fetch's global dispatcher replaced (setGlobalDispatcher)");
  }
  if (before.fakeTimers !== after.fakeTimers) {
    changes.push(
      after.fakeTimers
        ? 'fake timers left on (vi.useFakeTimers without vi.useRealTimers)'
        : 'fake timers turned off',
    );
  }
  return changes;
}

/** Puts the process back as `state` found it. */
export function restoreProcess(state: ProcessState): void {
  for (const name of Object.keys(process.env)) if (!(name in state.env)) delete process.env[name];
  for (const [name, value] of Object.entries(state.env)) if (value !== undefined) process.env[name] = value;
  if (process.cwd() !== state.cwd) process.chdir(state.cwd);
  process.umask(state.umask);
  for (const event of new Set([...process.eventNames(), ...state.listeners.keys()])) {
    const was = state.listeners.get(event) ?? [];
    for (const listener of listenersOf(event)) if (!was.includes(listener)) process.off(event, listener);
    for (const listener of was)
      if (!process.rawListeners(event).includes(listener)) process.on(event, listener);
  }
  process.exitCode = state.exitCode;
  // One made by a first fetch stays: dropping it would orphan the connections it holds in use.
  if (state.dispatcher !== undefined)
    (globalThis as Record<symbol, unknown>)[dispatcherKey] = state.dispatcher;
  if (!state.fakeTimers && vi.isFakeTimers()) vi.useRealTimers();
}
