/**
 * The Prometheus check of a shift step's analysis: one PromQL instant query, its first sample
 * compared with `min` / `max`. For routes whose traffic cutover does not see itself (nginx, exec),
 * or for any metric the application exports.
 *
 * Invariant: a check that cannot be evaluated (Prometheus down or slow, a query it refuses, a
 * query that selects nothing) is a failed check, `breach` with `failed: true`: traffic must not
 * move on a signal nobody could read. Only a NaN (e.g. 0/0: a rate over a window without traffic)
 * is `inconclusive`, as the built-in verdict is under minRequests.
 */
import type { PrometheusCheckSpec } from '../../core/analysis/analysis-settings.js';
import type { VerdictOutcome } from '../../core/analysis/verdict.js';

/** A PromQL range selector, e.g. `[4s]` or `[1m30s]` (subqueries `[5m:1m]` included). */
const rangeSelector = /\[\d+(ms|s|m|h|d|w|y)[^\]]*\]/;

/** Longest a query may take to answer before the check fails. */
export const prometheusQueryTimeoutMs = 10_000;

export interface PrometheusVerdict {
  outcome: VerdictOutcome;
  /** The sample's value; null when there was none. */
  value: number | null;
  /** One line with the query, the value and the bound, or the cause and what to do. */
  reason: string;
  /** The check could not be evaluated (counted as a breach). */
  failed?: true;
}

interface QueryAnswer {
  status?: string;
  errorType?: string;
  error?: string;
  data?: { resultType?: string; result?: unknown };
}

export async function runPrometheusCheck(
  check: PrometheusCheckSpec,
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<PrometheusVerdict> {
  const base = check.url.replace(/\/+$/, '');
  const where = `Prometheus at ${base}`;
  const q = `\`${check.query}\``;
  const timeoutMs = options.timeoutMs ?? prometheusQueryTimeoutMs;
  const signals = [AbortSignal.timeout(timeoutMs), ...(options.signal ? [options.signal] : [])];
  let status: number;
  let text: string;
  try {
    const response = await fetch(`${base}/api/v1/query?${new URLSearchParams({ query: check.query })}`, {
      signal: AbortSignal.any(signals),
    });
    status = response.status;
    text = await response.text();
  } catch (error) {
    options.signal?.throwIfAborted();
    const e = error as Error & { cause?: { code?: string; message?: string } };
    if (e.name === 'TimeoutError')
      return failed(
        `${where} did not answer the query ${q} within ${timeoutMs / 1000}s; check that it is up and not overloaded`,
      );
    const cause = e.cause?.code ?? e.cause?.message ?? e.message;
    return failed(`cannot reach ${where} (${cause}): start Prometheus there, or fix the check's url`);
  }
  let answer: QueryAnswer;
  try {
    answer = JSON.parse(text) as QueryAnswer;
  } catch {
    return failed(
      `${where} answered HTTP ${status} with no Prometheus answer (${snippet(text)}): is ${base} Prometheus's base URL, without /api/v1?`,
    );
  }
  if (answer.status !== 'success')
    return failed(
      `${where} refused the query ${q} (HTTP ${status}, ${answer.errorType ?? 'error'}): ${answer.error ?? 'no reason given'}; fix the query (try it in Prometheus's expression browser)`,
    );
  const value = firstSample(answer.data);
  if (value === undefined) {
    // rate()/increase() need two samples in their range: a range as short as the hold, under a
    // scrape interval longer than half of it, selects nothing however healthy green is.
    const range = rangeSelector.exec(check.query)?.[0];
    const cause = range
      ? `its range ${range} may hold fewer than two scrapes; make it at least twice Prometheus's scrape interval (and the hold as long), or`
      : 'the series may not be scraped yet or';
    return failed(
      `the query ${q} selected no sample at ${where}: ${cause} a label does not match; try it in Prometheus's expression browser`,
    );
  }
  if (Number.isNaN(value))
    return {
      outcome: 'inconclusive',
      value,
      reason: `the query ${q} gave NaN at ${where} (0/0: no traffic over its range?)`,
    };
  const below = check.min !== undefined && value < check.min;
  const above = check.max !== undefined && value > check.max;
  const bounds = [
    check.min !== undefined ? `min ${check.min}` : null,
    check.max !== undefined ? `max ${check.max}` : null,
  ].filter((b) => b !== null);
  if (below || above)
    return {
      outcome: 'breach',
      value,
      reason: `prometheus ${q} = ${formatValue(value)} ${below ? `< min ${check.min}` : `> max ${check.max}`}`,
    };
  return {
    outcome: 'pass',
    value,
    reason: `prometheus ${q} = ${formatValue(value)} within ${bounds.join(', ')}`,
  };
}

function failed(reason: string): PrometheusVerdict {
  return { outcome: 'breach', value: null, reason: `prometheus check failed: ${reason}`, failed: true };
}

/** The first sample of a vector, or a scalar's value; undefined when there is none. */
function firstSample(data: QueryAnswer['data']): number | undefined {
  const result = data?.result;
  if (!Array.isArray(result)) return undefined;
  const pair: unknown =
    data?.resultType === 'scalar' ? result : (result[0] as { value?: unknown } | undefined)?.value;
  if (!Array.isArray(pair) || typeof pair[1] !== 'string') return undefined;
  return sampleValue(pair[1]);
}

/**
 * A sample value as Prometheus writes it: a float in a string, with "+Inf" / "-Inf" for the
 * infinities (e.g. a ratio dividing by zero), which Number() reads as NaN; they must reach the
 * bound (a `max` breached by +Inf), only a real "NaN" is inconclusive.
 */
function sampleValue(text: string): number {
  const infinity = /^([+-]?)inf$/i.exec(text.trim());
  if (infinity) return infinity[1] === '-' ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY;
  return Number(text);
}

function formatValue(value: number): string {
  return Number.isFinite(value) ? String(Number(value.toPrecision(4))) : String(value);
}

function snippet(text: string): string {
  const line = text.trim().split('\n')[0] ?? '';
  return line.length > 80 ? `${line.slice(0, 80)}…` : line || 'an empty body';
}
