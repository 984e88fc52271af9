import { describeWaves } from '../core/plan/plan-edges.js';
import { describePlanHooks } from '../core/plan/plan-hooks.js';
import { describePlanHosts } from '../core/plan/plan-hosts.js';
import { describeNotifyTargets } from '../core/plan/plan-notify.js';
import { describeStateful } from '../core/plan/plan-stateful.js';
import { describePlannedAgainst, type PlannedAgainst } from '../core/plan/planned-against.js';
import { isEmptyPlan, type Plan, type ResourceChange } from '../core/plan/types.js';
import { changeSymbol, changeVerb, countsLine, formatChangeValue, formatValue } from './symbols.js';

/** GitHub refuses comments over 65,536 characters; stay clear of it with room for a note. */
export const markdownLimitChars = 65_000;
const noteReserveChars = 400;

/**
 * A plan as one pull-request comment: counts first, a table of what changes, then one collapsible
 * section per component and route, then every action in order. Past the size limit, sections are
 * left out whole and a note says how many and where to see them.
 */
export function renderPlanMarkdown(
  plan: Plan,
  { against, limitChars = markdownLimitChars }: { against?: PlannedAgainst; limitChars?: number } = {},
): string {
  const header = [
    `### cutover plan for \`${code(plan.environment)}\``,
    '',
    isEmptyPlan(plan)
      ? '**No changes.** The topology matches the current layout.'
      : `**${countsLine(plan.summary, plan.actions.length)}**`,
    '',
    `Strategy: commit **${plan.strategy.commit}**, bake **${cell(plan.strategy.bake)}**.`,
    '',
    ...(plan.notify && plan.notify.length > 0
      ? [`Notify: ${cell(describeNotifyTargets(plan.notify))}.`, '']
      : []),
    ...(plan.stateful ?? []).flatMap((entry) => [`Stateful: ${cell(describeStateful(entry))}`, '']),
    ...(plan.hosts && plan.hosts.length > 0 ? [`Hosts: ${cell(describePlanHosts(plan.hosts))}.`, ''] : []),
    ...(plan.strategy.hooks && plan.strategy.hooks.length > 0
      ? [`Hooks: ${cell(describePlanHooks(plan.strategy.hooks))}.`, '']
      : []),
    // In words, never a bare "base serial 0", which reads as "planned against an empty environment".
    `<sub>Planned ${cell(describePlannedAgainst(plan, against))} · plan id <code>${cell(plan.planId)}</code></sub>`,
    '',
    '',
  ].join('\n');
  const blocks: { text: string; counts: 'resource' | 'other' }[] = [];
  if (plan.drift && plan.drift.length > 0) blocks.push({ text: driftSection(plan), counts: 'other' });
  if (plan.resources.length > 0) {
    blocks.push({ text: '| | kind | name | because |\n|---|---|---|---|\n', counts: 'other' });
    for (const r of plan.resources) {
      blocks.push({
        text: `| \`${changeSymbol(r.change)}\` | ${r.kind} | **${cell(r.name)}** | ${cell(r.reason)} |\n`,
        counts: 'other',
      });
    }
    blocks.push({ text: '\n', counts: 'other' });
  }
  for (const r of plan.resources) blocks.push({ text: resourceSection(r), counts: 'resource' });
  if (plan.settings.length > 0) blocks.push({ text: settingsSection(plan), counts: 'other' });
  if (plan.actions.length > 0) blocks.push({ text: actionsSection(plan), counts: 'other' });

  let out = header;
  const budget = limitChars - noteReserveChars;
  for (let i = 0; i < blocks.length; i++) {
    const block = blocks[i] as { text: string };
    if (out.length + block.text.length > budget) {
      const leftOut = blocks.slice(i).filter((b) => b.counts === 'resource').length;
      out += truncationNote(leftOut, blocks.length - i);
      return out;
    }
    out += block.text;
  }
  return out;
}

/** What runs otherwise than recorded, before what changes: the plan's actions repair it. */
function driftSection(plan: Plan): string {
  const lines = ['**Changed outside of cutover** (the actions below repair it):', ''];
  for (const d of plan.drift ?? []) lines.push(`- ${d.kind} **${cell(d.name)}**: ${cell(d.reason)}`);
  return `${lines.join('\n')}\n\n`;
}

function resourceSection(r: ResourceChange): string {
  const lines = [
    `<details><summary><code>${changeSymbol(r.change)}</code> ${r.kind} <b>${cell(r.name)}</b> ${changeVerb(r.change)}</summary>`,
    '',
    `**Because:** ${cell(r.reason)}`,
    '',
  ];
  if (r.changes.length > 0) {
    lines.push('| field | before | after |', '|---|---|---|');
    for (const c of r.changes) {
      const before = c.before === undefined ? '' : `<code>${cell(formatChangeValue(c, c.before))}</code>`;
      const after = c.after === undefined ? '' : `<code>${cell(formatChangeValue(c, c.after))}</code>`;
      lines.push(`| <code>${cell(c.path)}</code> | ${before} | ${after} |`);
    }
    lines.push('');
  }
  if (r.actions.length > 0) {
    lines.push(`Actions: ${r.actions.map((id) => `<code>${cell(id)}</code>`).join(' → ')}`, '');
  }
  lines.push('</details>', '', '');
  return lines.join('\n');
}

function settingsSection(plan: Plan): string {
  const lines = [
    '<details><summary><code>~</code> settings will be updated</summary>',
    '',
    '| field | before | after |',
    '|---|---|---|',
  ];
  for (const c of plan.settings) {
    const before = c.before === undefined ? '' : `<code>${cell(formatValue(c.before))}</code>`;
    const after = c.after === undefined ? '' : `<code>${cell(formatValue(c.after))}</code>`;
    lines.push(`| <code>${cell(c.path)}</code> | ${before} | ${after} |`);
  }
  lines.push('', '</details>', '', '');
  return lines.join('\n');
}

function actionsSection(plan: Plan): string {
  const lines = [`<details><summary>All ${plan.actions.length} actions, in order</summary>`, ''];
  plan.actions.forEach((a, i) => {
    lines.push(`${i + 1}. <code>${cell(a.id)}</code> — ${cell(a.reason)}`);
  });
  lines.push('', `Waves (each runs at once, up to the parallelism): ${cell(describeWaves(plan.actions))}`);
  lines.push('', '</details>', '');
  return lines.join('\n');
}

function truncationNote(resourcesLeftOut: number, sectionsLeftOut: number): string {
  const what =
    resourcesLeftOut > 0 ? `${resourcesLeftOut} component and route sections` : `${sectionsLeftOut} sections`;
  return `\n> [!NOTE]\n> This plan is too long for one comment: ${what} are not shown. See the whole plan with \`cutover topology plan --format text\` or \`--format json\`.\n`;
}

/** Text safe inside a table cell or HTML: no pipes, tags, entities or line breaks can escape. */
function cell(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/\|/g, '&#124;')
    .replace(/`/g, '&#96;')
    .replace(/\r?\n/g, '<br>');
}

function code(text: string): string {
  return text.replace(/`/g, "'");
}
