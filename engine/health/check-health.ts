import http from 'node:http';
import { InvariantError } from '../../core/errors.js';
import { parseHostPort } from '../../core/host-port.js';
import { formatDuration } from '../../core/topology/duration.js';
import type { Health } from '../../core/topology/types.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import { commandProbe, httpProbe, type Probe, type ProbeResult, tcpProbe } from './probes.js';

/** The health gate said no. Not retryable: the migration rolls back and blue keeps serving. */
export class HealthGateFailedError extends Error {
  override readonly name = 'HealthGateFailedError';
  readonly retryable = false;
}

export interface WaitHealthyOptions {
  health: Health | undefined;
  /** host:port of each replica of the slot under test. */
  addresses: string[];
  /** Extra environment for a command probe, on top of process.env. */
  env?: Record<string, string>;
  /** Working directory of a command probe. */
  cwd: string;
  /** Time the slot has to become healthy; the runner passes what is left of health.deadline. */
  deadlineMs: number;
  signal: AbortSignal;
  log: (line: string) => void;
}

/**
 * Connection refused during this first fraction of the deadline does not count as a failure: the
 * process may still be starting. Every other failure counts from the first probe.
 */
const startupGraceFraction = 0.1;

interface Tally {
  successes: number;
  failures: number;
  last?: ProbeResult;
}

/**
 * Resolves once every probe target is healthy; rejects with HealthGateFailedError otherwise.
 *
 * The rules, in full:
 * - http and tcp probe each replica (address); a command probe is one target for the whole slot.
 * - Probing goes in rounds: every target at once, a round every `interval` (the next round starts
 *   at once when a round took longer). Each probe may take `timeout`.
 * - A target is healthy while its last `successThreshold` results were successes. The gate passes
 *   after the first round in which every target is healthy.
 * - A failure resets a target's successes. The gate fails as soon as any target has
 *   `failureThreshold` failures in a row. Connection refused within the first 10% of the deadline
 *   resets successes but is not counted as a failure (the process may still be starting).
 * - The gate fails when the deadline passes first; in-flight probes are stopped.
 * - Aborting `signal` stops every probe (sockets destroyed, commands killed) and rejects with the
 *   signal's reason.
 */
export async function waitHealthy(options: WaitHealthyOptions): Promise<void> {
  const { health, signal, log } = options;
  signal.throwIfAborted();
  if (!health) {
    log('no health check configured');
    return;
  }
  const agent = new http.Agent({ keepAlive: false });
  try {
    const probes = buildProbes(health, options, agent);
    log(
      `health: ${describeProbing(health, probes)} every ${formatDuration(health.interval)}` +
        ` (healthy after ${plural(health.successThreshold, 'success', 'successes')},` +
        ` fails after ${plural(health.failureThreshold, 'failure')} in a row, deadline ${formatDuration(options.deadlineMs)})`,
    );
    await runRounds(health, probes, options);
  } finally {
    agent.destroy();
  }
}

/** The probes of one slot: one per replica (http, tcp), or one command for the whole slot. */
export function buildProbes(
  health: Health,
  options: Pick<WaitHealthyOptions, 'addresses' | 'env' | 'cwd'>,
  agent: http.Agent,
): Probe[] {
  if (health.command) {
    const env = {
      ...inheritedEnv(),
      ...options.env,
      CUTOVER_ADDRESSES: options.addresses.join(','),
      CUTOVER_ADDRESS: options.addresses[0] ?? '',
    };
    return [commandProbe(health.command, options.cwd, env)];
  }
  if (!health.http && !health.tcp) throw new InvariantError('a health check without http, tcp or command');
  if (options.addresses.length === 0) {
    throw new HealthGateFailedError('no address to probe: the driver reported none for this slot');
  }
  for (const address of options.addresses) {
    if (!parseHostPort(address)) {
      throw new HealthGateFailedError(
        `cannot probe "${address}": the driver reported it, but it is not host:port`,
      );
    }
  }
  const spec = health.http;
  if (!spec) return options.addresses.map((address) => tcpProbe(address));
  let bodyMatch: RegExp | undefined;
  try {
    bodyMatch = spec.bodyMatch === undefined ? undefined : new RegExp(spec.bodyMatch);
  } catch (error) {
    throw new HealthGateFailedError(
      `health.http.bodyMatch is not a regular expression: ${(error as Error).message}`,
    );
  }
  return options.addresses.map((address) =>
    httpProbe(address, { path: spec.path, expectStatus: spec.expectStatus, bodyMatch }, agent),
  );
}

async function runRounds(health: Health, probes: Probe[], options: WaitHealthyOptions): Promise<void> {
  const { signal, log } = options;
  const startedAt = performance.now();
  const graceMs = options.deadlineMs * startupGraceFraction;
  const stop = new AbortController();
  const deadlineTimer = setTimeout(() => stop.abort(), Math.max(0, options.deadlineMs));
  const onAbort = () => stop.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  const tallies: Tally[] = probes.map(() => ({ successes: 0, failures: 0 }));

  const record = (probe: Probe, tally: Tally, result: ProbeResult) => {
    const changed = tally.last?.summary !== result.summary;
    tally.last = result;
    if (result.ok) {
      tally.successes += 1;
      tally.failures = 0;
      if (tally.successes === health.successThreshold) log(`health: ${probe.target} healthy`);
    } else if (result.refused && performance.now() - startedAt < graceMs) {
      tally.successes = 0;
      if (changed) log(`health: ${probeLabel(probe)} → ${result.summary} (not counted: starting up)`);
    } else {
      tally.successes = 0;
      tally.failures += 1;
      if (changed) log(`health: ${probeLabel(probe)} → ${result.summary}`);
    }
  };

  try {
    for (;;) {
      const roundStartedAt = performance.now();
      await Promise.all(
        probes.map(async (probe, i) => {
          const result = await probe.run(health.timeout, stop.signal);
          if (result) record(probe, tallies[i] as Tally, result);
        }),
      );
      if (signal.aborted) throw abortReason(signal);
      const failedAt = tallies.findIndex((t) => t.failures >= health.failureThreshold);
      if (failedAt >= 0) {
        const probe = probes[failedAt] as Probe;
        const tally = tallies[failedAt] as Tally;
        throw new HealthGateFailedError(
          `${probeLabel(probe)} → ${tally.last?.summary} (${plural(tally.failures, 'failure')} in a row)`,
        );
      }
      if (stop.signal.aborted) break;
      if (tallies.every((t) => t.successes >= health.successThreshold)) {
        log(
          health.command
            ? 'health: gate passed'
            : `health: gate passed (${describeTargets(health, probes)} healthy)`,
        );
        return;
      }
      await sleepUnlessAborted(health.interval - (performance.now() - roundStartedAt), stop.signal);
      if (stop.signal.aborted) break;
    }
    if (signal.aborted) throw abortReason(signal);
    throw new HealthGateFailedError(deadlineMessage(health, probes, tallies, options.deadlineMs));
  } finally {
    clearTimeout(deadlineTimer);
    signal.removeEventListener('abort', onAbort);
    stop.abort();
  }
}

function deadlineMessage(health: Health, probes: Probe[], tallies: Tally[], deadlineMs: number): string {
  const unhealthy = probes.flatMap((probe, i) => {
    const tally = tallies[i] as Tally;
    if (tally.successes >= health.successThreshold) return [];
    let last = tally.last?.summary ?? 'no probe finished';
    if (tally.successes > 0) last += `, ${tally.successes} of ${health.successThreshold} successes in a row`;
    return [`${probe.target} not healthy (last: ${last})`];
  });
  return `deadline ${formatDuration(Math.max(0, deadlineMs))} passed: ${unhealthy.join('; ')}`;
}

export function probeLabel(probe: Probe): string {
  return probe.action ? `${probe.target} ${probe.action}` : probe.target;
}

function describeProbing(health: Health, probes: Probe[]): string {
  if (health.command) return `running ${health.command.join(' ')}`;
  return `${probes[0]?.action} on ${describeTargets(health, probes)}`;
}

function describeTargets(health: Health, probes: Probe[]): string {
  if (health.command) return 'the slot';
  return probes.length === 1 ? '1 replica' : `${probes.length} replicas`;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/** Waits `ms` or until `signal` aborts, whichever is first; never rejects. */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
