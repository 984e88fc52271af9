import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { SavedPlan } from '../core/plan/saved-plan.js';
import { isEmptyPlan, type Plan } from '../core/plan/types.js';
import { type Diagnostic, formatDiagnostic } from '../core/topology/diagnostic.js';
import { parseYaml } from '../core/topology/parse-yaml.js';
import { renderPlanJson } from '../views/render-plan-json.js';
import { renderPlanMarkdown } from '../views/render-plan-markdown.js';
import { countsLine } from '../views/symbols.js';
import { writeAtomic } from './write-atomic.js';

/**
 * What the watcher wrote for one commit and file, in `<dir>/<short-sha>.*` (dir: `--out DIR/<environment>`,
 * else `<state>/watch/reports/<environment>`): `.plan.md` (the pull-request markdown), `.plan.json`
 * (the plan JSON), `.saved-plan.json` (the saved plan, the one `--apply` applies, and that
 * `cutover topology apply` takes), and with `--apply`, `.outcome.json` (what became of it).
 */
export interface Report {
  commit: string;
  file: string;
  environment: string;
  kind: 'plan' | 'invalid';
  plan?: Plan;
  /** The saved plan published for this commit (kind plan). */
  saved?: SavedPlan;
  diagnostics?: Diagnostic[];
  markdown: string;
  json: string;
  savedPlan?: string;
  outcome?: string;
  /** The migration started for it, if any. */
  migrationId?: string;
  /** Waiting for the migration in flight for its environment. */
  queued?: boolean;
  /** --apply could not start its migration (the reason is in the log). */
  notApplied?: boolean;
}

export type ReportContent =
  | { kind: 'plan'; saved: SavedPlan }
  | { kind: 'invalid'; diagnostics: Diagnostic[] };

/**
 * What became of a published plan with `--apply`: refused before it started (stale, conflict,
 * anything else: `reason`), started, or ended (a migration's final lifecycle); `stopped`: it did not
 * end, and nothing drives it any more (its status says how to resume it).
 */
export type OutcomeState =
  | 'refused'
  | 'started'
  | 'completed'
  | 'failed'
  | 'rolled_back'
  | 'cancelled'
  | 'stopped';

export interface Outcome {
  state: OutcomeState;
  planId: string;
  migrationId?: string;
  reason?: string;
}

/** Writes the Markdown, plan JSON and saved plan of one commit's file into `dir` (each atomically). */
export async function writeReport(
  where: { dir: string; branch: string },
  commit: string,
  file: string,
  environment: string,
  content: ReportContent,
): Promise<Report> {
  const dir = path.resolve(where.dir);
  mkdirSync(dir, { recursive: true });
  const short = commit.slice(0, 7);
  const stem = path.join(dir, short);
  const base = `${stem}.plan`;
  const footer = `Commit \`${short}\` of \`${where.branch}\`, \`${file}\`.`;
  let markdown: string;
  let json: string;
  if (content.kind === 'plan') {
    const { plan, plannedAgainst } = content.saved;
    markdown = `${renderPlanMarkdown(plan, { against: plannedAgainst }).trimEnd()}\n\n${footer}\n`;
    json = renderPlanJson(plan);
    await writeAtomic(`${stem}.saved-plan.json`, `${JSON.stringify(content.saved, null, 2)}\n`);
  } else {
    const lines = content.diagnostics.map(formatDiagnostic).join('\n');
    markdown = `### cutover: \`${file}\` is invalid at \`${short}\`\n\n${content.diagnostics.length} problem${content.diagnostics.length === 1 ? '' : 's'}; nothing was planned or applied.\n\n\`\`\`\n${lines}\n\`\`\`\n\n${footer}\n`;
    json = `${JSON.stringify({ commit, file, valid: false, diagnostics: content.diagnostics }, null, 2)}\n`;
  }
  await writeAtomic(`${base}.md`, markdown);
  await writeAtomic(`${base}.json`, json);
  const report: Report = {
    commit,
    file,
    environment,
    kind: content.kind,
    markdown: `${base}.md`,
    json: `${base}.json`,
  };
  if (content.kind === 'plan') {
    report.plan = content.saved.plan;
    report.saved = content.saved;
    report.savedPlan = `${stem}.saved-plan.json`;
  } else report.diagnostics = content.diagnostics;
  return report;
}

/**
 * Writes what became of a report's plan: `.outcome.json` (replaced at each step) and one line at
 * the end of its markdown (the one the last step wrote replaced, so the markdown says where it is).
 */
export async function writeOutcome(report: Report, outcome: Outcome): Promise<void> {
  const base = report.markdown.replace(/\.plan\.md$/, '');
  report.outcome = `${base}.outcome.json`;
  await writeAtomic(report.outcome, `${JSON.stringify({ commit: report.commit, ...outcome }, null, 2)}\n`);
  let markdown: string;
  try {
    markdown = readFileSync(report.markdown, 'utf8');
  } catch {
    return; // removed meanwhile: the outcome file says it
  }
  const at = markdown.lastIndexOf(`\n\n${outcomeMark} `);
  const kept = at === -1 ? markdown : markdown.slice(0, at + 1);
  await writeAtomic(report.markdown, `${kept}\n${outcomeMark} ${describeOutcome(outcome)}\n`);
}

const outcomeMark = '**Outcome:**';

export function describeOutcome(outcome: Outcome): string {
  const why = outcome.reason === undefined ? '' : `: ${outcome.reason}`;
  const as = `Applied as migration \`${outcome.migrationId ?? '?'}\``;
  switch (outcome.state) {
    case 'refused':
      return `not applied${why}`;
    case 'started':
      return `${as}: started`;
    case 'completed':
    case 'failed':
    case 'cancelled':
      return `${as}: ${outcome.state}${why}`;
    case 'rolled_back':
      return `${as}: rolled back${why}`;
    case 'stopped':
      return `${as}: stopped before it ended${why}`;
    default: {
      const never: never = outcome.state;
      return never;
    }
  }
}

export function summaryOf(plan: Plan): string {
  return isEmptyPlan(plan) ? 'no changes' : countsLine(plan.summary, plan.actions.length);
}

/** The environment a broken file meant, when its name can still be read; else one made from its path. */
export function environmentHint(text: string, file: string): string {
  // The bounded parser, as for the topology itself: the text comes from a commit.
  const parsed = parseYaml(text);
  const name = parsed.ok
    ? (parsed.value as { metadata?: { name?: unknown } } | null)?.metadata?.name
    : undefined;
  if (typeof name === 'string' && /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(name)) return name;
  return `invalid-${file
    .replace(/[^A-Za-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .toLowerCase()}`;
}
