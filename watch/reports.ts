import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { isEmptyPlan, type Plan } from '../core/plan/types.js';
import { type Diagnostic, formatDiagnostic } from '../core/topology/diagnostic.js';
import { parseYaml } from '../core/topology/parse-yaml.js';
import { renderPlanJson } from '../views/render-plan-json.js';
import { renderPlanMarkdown } from '../views/render-plan-markdown.js';
import { countsLine } from '../views/symbols.js';
import { writeAtomic } from './write-atomic.js';

/** What the watcher wrote for one commit and file: `<outDir>/<environment>/<short-sha>.plan.md|.json`. */
export interface Report {
  commit: string;
  file: string;
  environment: string;
  kind: 'plan' | 'invalid';
  plan?: Plan;
  diagnostics?: Diagnostic[];
  markdown: string;
  json: string;
  /** The migration started for it, if any. */
  migrationId?: string;
  /** Waiting for the migration in flight for its environment. */
  queued?: boolean;
  /** --apply could not start its migration (the reason is in the log). */
  notApplied?: boolean;
}

export type ReportContent = { kind: 'plan'; plan: Plan } | { kind: 'invalid'; diagnostics: Diagnostic[] };

/** Writes the Markdown and JSON reports of one commit's file (each atomically). */
export async function writeReport(
  where: { outDir: string; branch: string },
  commit: string,
  file: string,
  environment: string,
  content: ReportContent,
): Promise<Report> {
  const dir = path.join(path.resolve(where.outDir), environment);
  mkdirSync(dir, { recursive: true });
  const short = commit.slice(0, 7);
  const base = path.join(dir, `${short}.plan`);
  const footer = `Commit \`${short}\` of \`${where.branch}\`, \`${file}\`.`;
  let markdown: string;
  let json: string;
  if (content.kind === 'plan') {
    markdown = `${renderPlanMarkdown(content.plan).trimEnd()}\n\n${footer}\n`;
    json = renderPlanJson(content.plan);
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
  if (content.kind === 'plan') report.plan = content.plan;
  else report.diagnostics = content.diagnostics;
  return report;
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
