import { assertNever } from '../core/errors.js';
import { actionOutcome, isUndoing } from '../core/migration/action-outcomes.js';
import { sortedHas } from '../core/migration/plan-index.js';
import { commitIndex } from '../core/migration/queries.js';
import { describeFigure } from '../core/migration/replication-lag.js';
import type { MigrationSummary } from '../core/migration/summary.js';
import type { LogLine, MigrationState } from '../core/migration/types.js';
import { stages } from '../core/plan/types.js';
import type { Style } from './style.js';

export function time(ms: number | null): string {
  return ms === null ? '-' : new Date(ms).toISOString().replace('T', ' ').slice(0, 19);
}

/** A table of migrations, like `kubectl get`. */
export function renderMigrationList(list: readonly MigrationSummary[], style: Style): string {
  if (list.length === 0) return 'No migrations.\n';
  const rows = list.map((m) => [
    m.id,
    m.environment,
    // A rollback migration says so where the eye looks first (its status), as `show` does.
    m.rolledBackTo === undefined ? m.status : `${m.status} (rollback to serial ${m.rolledBackTo.serial})`,
    `${m.actionsDone}/${m.actionsTotal}`,
    time(m.startedAt),
    m.runnerPid ? String(m.runnerPid) : m.runner === 'dead' ? 'died' : '-',
  ]);
  const header = ['ID', 'ENVIRONMENT', 'STATUS', 'ACTIONS', 'STARTED (UTC)', 'RUNNER'];
  const widths = header.map((h, i) =>
    Math.min(60, Math.max(h.length, ...rows.map((r) => (r[i] as string).length))),
  );
  const line = (cells: string[]) =>
    cells
      .map((c, i) =>
        c.length > (widths[i] as number)
          ? `${c.slice(0, (widths[i] as number) - 1)}…`
          : c.padEnd(widths[i] as number),
      )
      .join('  ')
      .trimEnd();
  return `${style.bold(line(header))}\n${rows.map(line).join('\n')}\n`;
}

/** A migration made by `rollback --to`, in words: "back to serial 3 (recorded by mig_…)". */
export function rolledBackToText(summary: MigrationSummary): string | null {
  const to = summary.rolledBackTo;
  if (to === undefined) return null;
  return `back to serial ${to.serial}${to.migrationId === undefined ? '' : ` (recorded by ${to.migrationId})`}`;
}

/** Where the recorded commit came from, in words: ` (from the saved plan)`. */
function commitOrigin(summary: MigrationSummary): string {
  switch (summary.commitFrom) {
    case null:
      return '';
    case 'saved_plan':
      return ' (planned: from the saved plan)';
    case 'option':
      return ' (given: migrate --commit)';
    case 'request':
      return " (given: the request's commit)";
    default:
      return assertNever(summary.commitFrom, 'commit origin');
  }
}

/** One migration: status, then every action with its progress. */
export function renderMigration(summary: MigrationSummary, state: MigrationState, style: Style): string {
  const lines = [
    `${style.bold(summary.id)}  environment ${summary.environment}`,
    `  status:    ${summary.status}`,
    `  plan:      ${summary.planId}`,
    `  started:   ${time(summary.startedAt)} UTC${summary.startedBy === null ? '' : ` by ${summary.startedBy}`}`,
  ];
  // No commit given: the checkout's HEAD, when known, is the one said (applied, below).
  if (summary.commit !== null || summary.appliedCommit === null)
    lines.push(`  commit:    ${summary.commit ?? 'unknown'}${commitOrigin(summary)}`);
  const back = rolledBackToText(summary);
  if (back !== null) lines.push(`  rollback:  ${back}, made by \`cutover topology rollback --to\``);
  if (summary.appliedCommit !== null)
    lines.push(`  applied:   ${summary.appliedCommit} (HEAD of the checkout applied from)`);
  if (summary.committedAt !== null) lines.push(`  committed: ${time(summary.committedAt)} UTC`);
  if (summary.endedAt !== null) lines.push(`  ended:     ${time(summary.endedAt)} UTC`);
  if (summary.runnerPid !== null) lines.push(`  runner:    pid ${summary.runnerPid}`);
  for (const figure of summary.replication ?? []) {
    const text = `  lag:       ${describeFigure(figure, (ms) => `${time(ms)} UTC`)}`;
    lines.push(figure.waiting ? style.yellow(text) : text);
  }
  lines.push(...renderSkippedSteps(state, style));
  lines.push(...renderAnalyses(state, style));
  lines.push('', style.bold('Actions:'));
  // Once it undoes what it did, each action says whether it ran, was stopped, or never ran.
  const words = isUndoing(state) ? (i: number) => `${outcomeWords(state, i).padEnd(16)} ` : () => '';
  state.spec.plan.actions.forEach((action, i) => {
    lines.push(
      `  ${actionMark(state, i, style)} ${action.id.padEnd(32)} ${words(i)}${style.dim(action.reason)}`,
    );
  });
  return `${lines.join('\n')}\n`;
}

/** The analyses of shift holds, one line each: the step, the verdict and its figures. */
export function renderAnalyses(state: MigrationState, style: Style): string[] {
  const analyses = state.analyses ?? [];
  if (analyses.length === 0) return [];
  return [
    '',
    style.bold('Analyses:'),
    ...analyses.map((a) => {
      const mark =
        a.outcome === 'pass' ? style.green('✓') : a.outcome === 'breach' ? style.red('✗') : style.yellow('?');
      return `  ${mark} ${`${a.weight} %`.padEnd(6)} ${a.outcome.padEnd(12)} ${a.reason}`;
    }),
  ];
}

/**
 * Undo steps left for a person: each with its step id (for `resolve --step`), what it was, its
 * error, and how it was resolved once it was.
 */
export function renderSkippedSteps(state: MigrationState, style: Style): string[] {
  const skipped = state.ending?.skipped ?? [];
  if (skipped.length === 0) return [];
  const left = skipped.filter((s) => s.resolved === undefined).length;
  const lines = [
    `  ${left > 0 ? style.red('needs a person:') : 'undo steps left for a person:'} ${left} of ${skipped.length} undo step${skipped.length === 1 ? '' : 's'} unresolved`,
  ];
  for (const step of skipped) {
    const how = step.resolved
      ? style.green(
          `resolved: ${step.resolved.how === 'retried' ? 'retried, done' : 'skipped by hand'}${step.resolved.by ? ` by ${step.resolved.by}` : ''} at ${time(step.resolved.at)} UTC`,
        )
      : step.retrying
        ? style.yellow('being retried')
        : style.red(`failed: ${step.error.trim().replace(/\s*\n\s*/g, ' / ')}`);
    lines.push(`    ${step.command.id.padEnd(5)} ${step.what} — ${how}`);
  }
  if (left > 0) {
    lines.push(
      `    resolve: cutover topology migration resolve ${state.spec.id} --retry | --skip [--step STEP]`,
    );
  }
  return lines;
}

function actionMark(state: MigrationState, index: number, style: Style): string {
  const outcome = actionOutcome(state, index);
  switch (outcome) {
    case 'done':
      return style.green('✓');
    case 'undone':
    case 'stopped':
      return style.yellow('↺');
    case 'failed':
      return style.red('✗');
    case 'running':
    case 'not_run': {
      // Actions run concurrently: done ones may follow one still running, so ask the state, not the cursor.
      const current = outcome === 'running' || (index === state.cursor && state.lifecycle !== 'completed');
      if (!current) return style.dim('·');
      return state.lifecycle === 'running' || state.lifecycle === 'committing'
        ? style.yellow('▶')
        : style.yellow('‖');
    }
    default:
      return assertNever(outcome, 'action outcome');
  }
}

/** What became of an action, in words, once the migration undoes what it did. */
function outcomeWords(state: MigrationState, index: number): string {
  const undoing = state.lifecycle === 'rolling_back' ? 'undoing' : 'undone';
  const outcome = actionOutcome(state, index);
  switch (outcome) {
    case 'undone':
      return `ran, ${undoing}`;
    case 'stopped':
      return `stopped, ${undoing}`;
    case 'failed':
      return 'failed';
    case 'not_run':
      return 'not run';
    case 'done':
    case 'running':
      return outcome;
    default:
      return assertNever(outcome, 'action outcome');
  }
}

/** `12:04:31  stage health_gate` — a log line as plain text. */
export function renderLogLine(line: LogLine, style: Style): string {
  const at = new Date(line.at).toISOString().slice(11, 23);
  const text =
    line.level === 'error'
      ? style.red(line.message)
      : line.level === 'warn'
        ? style.yellow(line.message)
        : line.message;
  return `${style.dim(at)}  ${line.kind === 'driver' ? style.dim(line.message) : text}`;
}

/** The live view on a terminal: stages with progress, the current action, the latest lines. */
export function renderLiveView(state: MigrationState, recent: readonly LogLine[], style: Style): string {
  const actions = state.spec.plan.actions;
  const stageMarks = stages.map((stage) => {
    const indexes = actions.map((a, i) => (a.stage === stage ? i : -1)).filter((i) => i >= 0);
    if (indexes.length === 0) return style.dim(`${stage} –`);
    const done = indexes.filter((i) => sortedHas(state.done, i)).length;
    const mark =
      done === indexes.length
        ? style.green('✓')
        : indexes.includes(state.cursor) || state.running.some((r) => indexes.includes(r.index))
          ? style.yellow('▶')
          : style.dim('·');
    return `${mark} ${stage} ${done}/${indexes.length}`;
  });
  const bake =
    state.cursor >= commitIndex(state.spec) && !state.bakeDone && state.spec.desired.strategy.bake > 0;
  const current = actions[state.cursor];
  const lines = [
    `${style.bold(state.spec.id)}  ${state.spec.environment}  ${style.bold(state.lifecycle.replace('_', ' '))}`,
    `  ${stageMarks.join('   ')}`,
    `  ${bake ? 'bake time' : current && state.lifecycle !== 'rolling_back' ? `now: ${nowRunning(state, current.id)}` : ''}`,
    ...recent.slice(-6).map((l) => `  ${renderLogLine(l, style)}`),
  ];
  return lines.join('\n');
}

/** The actions in progress, for the live view: "provision_green:db, provision_green:cache (+3 more)". */
function nowRunning(state: MigrationState, fallback: string): string {
  const ids = state.running.map((r) => state.spec.plan.actions[r.index]?.id as string);
  if (ids.length === 0) return fallback;
  const shown = ids.slice(0, 3).join(', ');
  return ids.length > 3 ? `${shown} (+${ids.length - 3} more)` : shown;
}
