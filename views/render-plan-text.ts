import { describeWaves } from '../core/plan/plan-edges.js';
import { describePlanHooks } from '../core/plan/plan-hooks.js';
import { absentPlanHosts, describePlanHosts } from '../core/plan/plan-hosts.js';
import { describeNotifyTargets } from '../core/plan/plan-notify.js';
import { describeStateful } from '../core/plan/plan-stateful.js';
import { describePlannedAgainst, type PlannedAgainst } from '../core/plan/planned-against.js';
import { isEmptyPlan, type Plan } from '../core/plan/types.js';
import { sensitiveText } from '../core/topology/secret-refs.js';
import type { Style } from './style.js';
import {
  changeColor,
  changeSymbol,
  changeVerb,
  countsLine,
  formatChangeValue,
  formatValue,
} from './symbols.js';

export interface TextOptions {
  style: Style;
  /** What it was planned against, for the header; without it, said from the plan's serial. */
  against?: PlannedAgainst;
}

/** Like `terraform plan`: what changes per component and route, the actions in order, the counts. */
export function renderPlanText(plan: Plan, { style, against }: TextOptions): string {
  const lines: string[] = [];
  lines.push(style.bold(`cutover plan for environment "${plan.environment}"`));
  lines.push(style.dim(`Planned ${describePlannedAgainst(plan, against)}.`));
  lines.push('');
  if (isEmptyPlan(plan)) {
    lines.push(`${style.green('No changes.')} The topology matches the current layout.`);
    lines.push('');
    lines.push(strategyLine(plan), ...notifyLines(plan));
    lines.push(style.dim(`plan id ${plan.planId}`));
    return `${lines.join('\n')}\n`;
  }
  if (plan.drift && plan.drift.length > 0) {
    // Like Terraform's "Objects have changed outside of Terraform": the world, before the plan.
    lines.push(style.bold('Changed outside of cutover:'));
    for (const d of plan.drift)
      lines.push(`  ${style.yellow('!')} ${d.kind} ${style.bold(d.name)}: ${d.reason}`);
    lines.push(style.dim('  The actions below repair it.'));
    lines.push('');
  }
  for (const r of plan.resources) {
    const color = changeColor(r.change, style);
    lines.push(
      `  ${color(changeSymbol(r.change))} ${style.bold(`${r.kind} ${r.name}`)} ${changeVerb(r.change)}`,
    );
    lines.push(`      ${style.dim(`because: ${r.reason}`)}`);
    for (const c of r.changes) {
      const before = formatChangeValue(c, c.before);
      const after = formatChangeValue(c, c.after);
      if (c.before === undefined) lines.push(`      ${style.green('+')} ${c.path}: ${after}`);
      else if (c.after === undefined) lines.push(`      ${style.red('-')} ${c.path}: ${before}`);
      else if (c.sensitive && c.before === c.after)
        lines.push(`      ${style.yellow('~')} ${c.path}: changed ${sensitiveText}`);
      else lines.push(`      ${style.yellow('~')} ${c.path}: ${before} → ${after}`);
    }
    lines.push('');
  }
  if (plan.settings.length > 0) {
    lines.push(`  ${style.yellow('~')} ${style.bold('settings')} will be updated`);
    for (const c of plan.settings) {
      lines.push(
        `      ${c.path}: ${c.before === undefined ? '(unset)' : formatValue(c.before)} → ${c.after === undefined ? '(unset)' : formatValue(c.after)}`,
      );
    }
    lines.push('');
  }
  if (plan.actions.length > 0) {
    lines.push(style.bold('Actions, in order:'));
    const idWidth = Math.min(40, Math.max(...plan.actions.map((a) => a.id.length)));
    plan.actions.forEach((a, i) => {
      const n = String(i + 1).padStart(String(plan.actions.length).length);
      lines.push(`  ${style.dim(n)}. ${a.id.padEnd(idWidth)}  ${a.reason}`);
    });
    lines.push('');
    // What runs at once (up to the parallelism): each wave waits only for earlier ones.
    lines.push(`${style.bold('Waves:')} ${describeWaves(plan.actions)}`);
    lines.push('');
  }
  lines.push(style.bold(countsLine(plan.summary, plan.actions.length)));
  lines.push(strategyLine(plan), ...notifyLines(plan));
  lines.push(style.dim(`plan id ${plan.planId}`));
  return `${lines.join('\n')}\n`;
}

/** How the migration ends: who commits it, and after how long a bake. */
function strategyLine({ strategy }: Plan): string {
  const commit =
    strategy.commit === 'manual'
      ? 'commit manual (run `cutover topology migration commit` when it awaits)'
      : 'commit auto';
  const hooks =
    strategy.hooks && strategy.hooks.length > 0 ? ` Hooks: ${describePlanHooks(strategy.hooks)}.` : '';
  return `Strategy: ${commit}, bake ${strategy.bake}.${hooks}`;
}

/** Where the migration's events go, when the topology has targets (never a secret). */
function notifyLines({ notify, stateful, hosts }: Plan): string[] {
  const lines = notify && notify.length > 0 ? [`Notify: ${describeNotifyTargets(notify)}.`] : [];
  if (hosts && hosts.length > 0) lines.push(`Hosts: ${describePlanHosts(hosts)}.`);
  for (const host of absentPlanHosts(hosts))
    lines.push(
      `Warning: no worker polls host ${host} now: a migration would wait for one (\`cutover worker --host ${host}\`); migrate refuses it without --allow-absent-hosts.`,
    );
  for (const entry of stateful ?? []) lines.push(`Stateful: ${describeStateful(entry)}`);
  return lines;
}
