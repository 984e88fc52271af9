/**
 * The analysis settings of a shift step, as written in a topology (`schemas/analysis.v1.json`, a
 * fragment the topology schema includes for `shift` steps) and as the verdict takes them.
 * Validation is the schema's (how things are written) plus the checks here (what they mean).
 */
import { createRequire } from 'node:module';
import type { Ajv as AjvClass, ErrorObject } from 'ajv';
import analysisSchema from '../../schemas/analysis.v1.json' with { type: 'json' };
import { ajvOptions } from '../topology/ajv-options.js';
import type { PathProblem } from '../topology/diagnostic.js';
import { parseDuration } from '../topology/duration.js';
import { latencyBucketBoundsMs } from './traffic.js';
import type { AnalysisChecks } from './verdict.js';

export { analysisSchema };

/** `minRequests` when a step names none: Flagger's and Argo's usual floor for a judged window. */
export const defaultMinRequests = 50;
/** The longest p99 the router's histogram tells apart: its highest finite bound. */
export const maxLatencyBoundMs = latencyBucketBoundsMs[latencyBucketBoundsMs.length - 1] ?? 30_000;

/** One Prometheus check: the first sample of `query` at the window's end, within [min, max]. */
export interface PrometheusCheckSpec {
  url: string;
  query: string;
  min?: number;
  max?: number;
}

export interface AnalysisSettings {
  checks: AnalysisChecks;
  prometheus: PrometheusCheckSpec[];
}

/** The settings as written (the schema's shape). */
interface WrittenAnalysis {
  minRequests?: number;
  successRate?: { min: number };
  latency?: { p99: { max: string } };
  compareWithBlue?: { p99?: { maxRatio: number }; successRate?: { maxDrop: number } };
  prometheus?: PrometheusCheckSpec[];
}

type Validate = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };
/** Cache: the schema of `analysis:`, compiled on first use, once per process (its input is a constant). */
let compiled: Validate | undefined;

function validator(): Validate {
  if (!compiled) {
    const { Ajv } = createRequire(import.meta.url)('ajv') as { Ajv: typeof AjvClass };
    compiled = new Ajv(ajvOptions).compile(analysisSchema) as Validate;
  }
  return compiled;
}

/**
 * Parses a step's `analysis:` value. `at` is where it sits in the file (e.g. `['routes', 'web',
 * 'shift', 0, 'analysis']`), so every problem's path is a path of the file.
 */
export function parseAnalysisSettings(
  value: unknown,
  at: readonly (string | number)[] = [],
): { settings: AnalysisSettings; problems: [] } | { settings: null; problems: PathProblem[] } {
  const validate = validator();
  if (!validate(value)) {
    const problems = (validate.errors ?? []).map((error) => schemaProblem(error, at));
    return { settings: null, problems: dedupe(problems) };
  }
  const written = value as WrittenAnalysis;
  const problems: PathProblem[] = [];
  const checks: AnalysisChecks = { minRequests: written.minRequests ?? defaultMinRequests };
  if (written.successRate) checks.successRate = { min: written.successRate.min };
  if (written.latency) {
    const top = `${maxLatencyBoundMs / 1000}s`; // written as a topology duration
    const maxMs = parseDuration(written.latency.p99.max) ?? 0;
    const path = [...at, 'latency', 'p99', 'max'];
    if (maxMs <= 0) problems.push({ path, message: 'must be longer than 0ms' });
    // quantileMs reads a p99 in the +Inf bucket as the top bound itself, so a bound at the top
    // (or above it) is never exceeded: only a bound strictly below it can be breached.
    else if (maxMs >= maxLatencyBoundMs)
      problems.push({
        path,
        message: `must be below ${top}: the router's latency histogram ends there and reads any slower p99 as ${top}, so a bound of ${top} or more could never be breached`,
      });
    checks.latency = { p99: { maxMs } };
  }
  if (written.compareWithBlue) {
    const { p99, successRate } = written.compareWithBlue;
    checks.compareWithBlue = {
      ...(p99 ? { p99: { maxRatio: p99.maxRatio } } : {}),
      ...(successRate ? { successRate: { maxDrop: successRate.maxDrop } } : {}),
    };
  }
  const prometheus = written.prometheus ?? [];
  prometheus.forEach((check, i) => {
    // (Not in the schema: ajv's strict mode refuses `required` of keys declared only in a sibling.)
    if (check.min === undefined && check.max === undefined)
      problems.push({
        path: [...at, 'prometheus', i],
        message: 'needs min or max: the bound its value is judged against',
      });
    if (check.min !== undefined && check.max !== undefined && check.min > check.max)
      problems.push({
        path: [...at, 'prometheus', i, 'min'],
        message: `is above max (${check.max}): no value could pass`,
      });
  });
  if (!checks.successRate && !checks.latency && !checks.compareWithBlue && prometheus.length === 0)
    problems.push({
      path: [...at],
      message: 'names no check: set successRate, latency, compareWithBlue or prometheus',
    });
  if (problems.length > 0) return { settings: null, problems };
  return { settings: { checks, prometheus }, problems: [] };
}

function schemaProblem(error: ErrorObject, at: readonly (string | number)[]): PathProblem {
  const path = [
    ...at,
    ...error.instancePath
      .split('/')
      .slice(1)
      .map((part) => (/^\d+$/.test(part) ? Number(part) : part.replace(/~1/g, '/').replace(/~0/g, '~'))),
  ];
  switch (error.keyword) {
    case 'additionalProperties': {
      const key = (error.params as { additionalProperty: string }).additionalProperty;
      return { path: [...path, key], message: `is not a setting of analysis here`, atKey: true };
    }
    case 'pattern':
      if (error.schemaPath.includes('duration'))
        return { path, message: 'must be a duration such as 500ms, 30s, 2m or 1m30s' };
      return { path, message: 'must be an http:// or https:// URL, e.g. http://127.0.0.1:9090' };
    default:
      return { path, message: error.message ?? 'is not valid' };
  }
}

function dedupe(problems: PathProblem[]): PathProblem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = `${p.path.join('\u0000')}\u0001${p.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
