/**
 * Delivers a migration's notifications beside it, never in its path: `publish` only queues and
 * returns; each target has its own queue (its events arrive in order) with a timeout per attempt,
 * a bounded number of retries with exponential backoff, and a bound on the whole delivery. A
 * receiver that is down, slow or wrong never blocks the migration, never fails it, and delays
 * nothing but its own later events. Every result is a line of the migration's log and a line of
 * its notifications record.
 */
import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { eventSeverity } from '../../core/notify/migration-events.js';
import { type CloudEvent, severityAtLeast } from '../../core/notify/types.js';
import { shownNotifyUrl } from '../../core/plan/plan-notify.js';
import type { Redactor } from '../../core/redact.js';
import type { NotifyTarget } from '../../core/topology/types.js';
import type { SecretSource } from '../secrets/secret-source.js';
import { sendOnce } from './send.js';

/** The first retry waits this long, each next one twice as long (0.5 s, 1 s, 2 s…). */
export const notifyBackoffBaseMs = 500;
/** A delivery, all its attempts and waits included, ends by then (gives up): the bound on the whole. */
export const deliveryBudgetMs = 60_000;
/** Once the migration has ended, how long a detached runner waits for the deliveries left before it exits. */
export const exitGraceMs = 5_000;
/**
 * The same for a migration driven in the caller's own process (`migrate` in the foreground): the
 * person or script waiting for the command is kept at most this long after the migration ended.
 */
export const attachedGraceMs = 1_000;

/** One delivery's result, as the record keeps it (`notifications.ndjson`). */
export interface DeliveryRecord {
  at: number;
  target: string;
  targetType: NotifyTarget['type'];
  /** The URL (or `(sensitive)`) or the command: where it went. */
  to: string;
  event: string;
  type: string;
  outcome: 'delivered' | 'gave_up' | 'abandoned';
  attempts: number;
  ms: number;
  status?: number;
  error?: string;
}

export interface NotifierOptions {
  targets: Record<string, NotifyTarget>;
  secrets: SecretSource;
  baseDir: string;
  /** Where each result is appended (one JSON object per line). */
  recordFile: string;
  /** A line for the migration's log. */
  log: (level: 'info' | 'warn', message: string) => void;
  now?: () => number;
  backoffBaseMs?: number;
  /** Masks secrets in every payload sent and every line recorded or logged. */
  redact?: Redactor;
}

export class Notifier {
  private readonly queues = new Map<string, Promise<void>>();
  private readonly pending = new Set<Promise<void>>();
  private readonly abandon = new AbortController();
  private readonly now: () => number;

  constructor(private readonly options: NotifierOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Queues the event for every target that wants it; returns at once and never throws. */
  publish(given: CloudEvent): void {
    const event = this.options.redact ? this.options.redact.value(given) : given;
    for (const [name, target] of Object.entries(this.options.targets)) {
      if (!wants(target, event)) continue;
      const previous = this.queues.get(name) ?? Promise.resolve();
      const next = previous.then(() => this.deliver(name, target, event));
      this.queues.set(name, next);
      this.pending.add(next);
      void next.finally(() => this.pending.delete(next));
    }
  }

  /**
   * Resolves once every queued delivery has ended, or after `graceMs`: what is left then is
   * abandoned (recorded as such), so a process that exits after this loses nothing silently.
   */
  async settle(graceMs = exitGraceMs): Promise<void> {
    if (this.pending.size === 0) return;
    const timer = setTimeout(() => this.abandon.abort(), graceMs);
    try {
      while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Abandons every delivery at once (the process is stopping without waiting): requests destroyed,
   * commands' process groups killed, each recorded as abandoned. Publishing after this abandons too.
   */
  abandonAll(): void {
    this.abandon.abort();
  }

  private async deliver(name: string, target: NotifyTarget, event: CloudEvent): Promise<void> {
    const started = this.now();
    const deadline = started + deliveryBudgetMs;
    const base = this.options.backoffBaseMs ?? notifyBackoffBaseMs;
    const signal = this.abandon.signal;
    let attempts = 0;
    let last: { error: string; status?: number } = { error: '' };
    let outcome: DeliveryRecord['outcome'] = 'gave_up';
    let status: number | undefined;
    while (!signal.aborted) {
      attempts++;
      const timeoutMs = Math.max(1, Math.min(target.timeout, deadline - this.now()));
      const abandoned = aborted(signal);
      const result = await Promise.race([
        sendOnce(target, event, {
          secrets: this.options.secrets,
          baseDir: this.options.baseDir,
          timeoutMs,
          now: this.now,
          abandon: signal,
        }),
        abandoned.promise,
      ]).finally(abandoned.stop);
      if (result === null) break;
      if (result.ok) {
        outcome = 'delivered';
        status = result.status;
        break;
      }
      last =
        result.status === undefined
          ? { error: result.error }
          : { error: result.error, status: result.status };
      const waitMs = base * 2 ** (attempts - 1);
      if (!result.retryable || attempts > target.retries || this.now() + waitMs >= deadline) break;
      try {
        await sleep(waitMs, undefined, { signal });
      } catch {
        break;
      }
    }
    if (outcome !== 'delivered' && signal.aborted) {
      outcome = 'abandoned';
      if (attempts === 0) last = { error: 'not attempted (queued behind earlier events of this target)' };
    }
    this.report(name, target, event, { outcome, attempts, ms: this.now() - started, status, last });
  }

  private report(
    name: string,
    target: NotifyTarget,
    event: CloudEvent,
    r: {
      outcome: DeliveryRecord['outcome'];
      attempts: number;
      ms: number;
      status: number | undefined;
      last: { error: string; status?: number };
    },
  ): void {
    const to = describeTarget(target);
    const what = event.type.replace(/^dev\.cutover\./, '');
    const record: DeliveryRecord = {
      at: this.now(),
      target: name,
      targetType: target.type,
      to,
      event: event.id,
      type: event.type,
      outcome: r.outcome,
      attempts: r.attempts,
      ms: r.ms,
      ...(r.outcome === 'delivered'
        ? r.status === undefined
          ? {}
          : { status: r.status }
        : { error: r.last.error }),
      ...(r.outcome !== 'delivered' && r.last.status !== undefined ? { status: r.last.status } : {}),
    };
    const head = `notify ${name} (${target.type} ${to})`;
    const plural = r.attempts === 1 ? '' : 's';
    const message =
      r.outcome === 'delivered'
        ? `${head}: delivered ${what} in ${r.ms} ms${r.status === undefined ? '' : ` (${r.status})`}${r.attempts > 1 ? ` at attempt ${r.attempts}` : ''}`
        : r.outcome === 'abandoned'
          ? `${head}: abandoned ${what} after ${r.attempts} attempt${plural}, as the process driving the migration exits: ${r.last.error || 'no answer yet'}`
          : `${head}: gave up on ${what} after ${r.attempts} attempt${plural}: ${r.last.error}`;
    try {
      const line = this.options.redact ? this.options.redact.value(record) : record;
      appendFileSync(this.options.recordFile, `${JSON.stringify(line)}\n`);
    } catch {
      // The record is for people, as the log is: a full disk must not stop the migration.
    }
    this.options.log(
      r.outcome === 'delivered' ? 'info' : 'warn',
      this.options.redact ? this.options.redact.text(message) : message,
    );
  }
}

function wants(target: NotifyTarget, event: CloudEvent): boolean {
  const name = event.data.event;
  if (!severityAtLeast(eventSeverity[name], target.severity)) return false;
  return target.events === undefined || target.events.includes(name);
}

/** The command's program, or the URL without credentials (shownNotifyUrl): what logs and records show. */
export function describeTarget(target: NotifyTarget): string {
  if (target.type === 'command') return target.command[0] as string;
  return shownNotifyUrl(target);
}

/**
 * Resolves with null when `signal` aborts. `stop` removes the listener: every attempt of every
 * delivery races one of these on the notifier's one signal, and a listener left behind per attempt
 * piled up (Node's MaxListenersExceededWarning in the middle of a migrate with a few targets).
 */
function aborted(signal: AbortSignal): { promise: Promise<null>; stop: () => void } {
  let stop = () => {};
  const promise = new Promise<null>((resolve) => {
    if (signal.aborted) return resolve(null);
    const onAbort = () => resolve(null);
    signal.addEventListener('abort', onAbort, { once: true });
    stop = () => signal.removeEventListener('abort', onAbort);
  });
  return { promise, stop };
}
