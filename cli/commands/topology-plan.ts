import { type Command, Option } from 'commander';
import { CutoverError } from '../../core/errors.js';
import { isEmptyPlan } from '../../core/plan/types.js';
import type { PlanBase } from '../../engine/api.js';
import { renderPlanJson } from '../../views/render-plan-json.js';
import { renderPlanMarkdown } from '../../views/render-plan-markdown.js';
import { renderPlanText } from '../../views/render-plan-text.js';
import { plainStyle, styleFor } from '../../views/style.js';
import { countsLine } from '../../views/symbols.js';
import { addServerOption, type ServerOption, withService } from '../service.js';
import { writeOutput } from '../write-output.js';

type Format = 'text' | 'json' | 'markdown';

interface PlanOptions extends ServerOption {
  file: string;
  against?: string;
  againstRef?: string;
  format: Format;
  json?: boolean;
  detailedExitcode?: boolean;
  out?: string;
  refresh: 'true' | 'false';
  replace: string[];
}

/** `--replace a --replace b`: every name, in order. */
export function collectNames(name: string, names: string[]): string[] {
  return [...names, name];
}

export function registerPlan(topology: Command): void {
  addServerOption(topology.command('plan'))
    .description('show what a migration to this topology would do, and why, without changing anything')
    .option('-f, --file <file>', 'the desired topology file', 'topology.yaml')
    .option('--against <file>', 'plan against another topology file instead of the recorded layout')
    .option('--against-ref <gitref>', 'plan against the same file at a Git revision (e.g. origin/main)')
    .addOption(
      new Option('--format <format>', 'output format').choices(['text', 'json', 'markdown']).default('text'),
    )
    .option('--json', 'same as --format json')
    .option(
      '--detailed-exitcode',
      'exit 0 when there are no changes, 2 when there are changes or drift, 1 on error',
    )
    .addOption(
      new Option('--refresh <boolean>', 'observe what runs before planning (false: the record alone)')
        .choices(['true', 'false'])
        .default('true'),
    )
    .option(
      '--replace <component>',
      'plan a green-blue replacement of this component with no change (repeatable)',
      collectNames,
      [],
    )
    .option('--out <file>', 'write the plan to a file instead of standard output')
    .addHelpText(
      'after',
      `
Without --against or --against-ref the plan is computed against the layout recorded in the state
directory (.cutover/ beside the file, or CUTOVER_STATE_DIR): empty before the first migration.
It first observes what runs (replicas alive and answering, routes served, nginx files as written):
what differs from the record is drift, shown under "Changed outside of cutover", and the plan
repairs it. --refresh=false plans from the record alone.

Exit codes: 0 success, 1 error; with --detailed-exitcode: 0 no changes, 1 error, 2 changes or drift.

Examples:
  $ cutover topology plan -f topology.yaml
  $ cutover topology plan -f topology.yaml --detailed-exitcode   # 2: something to change or repair
  $ cutover topology plan -f topology.yaml --refresh=false --replace api
  $ cutover topology plan --against-ref origin/main --format markdown --out plan.md
  $ cutover topology plan -f after.yaml --against before.yaml --json | jq .summary`,
    )
    .action(async (options: PlanOptions) => {
      if (options.against !== undefined && options.againstRef !== undefined) {
        throw new CutoverError('USAGE', '--against and --against-ref cannot be used together');
      }
      const against: PlanBase =
        options.against !== undefined
          ? { kind: 'file', file: options.against }
          : options.againstRef !== undefined
            ? { kind: 'git-ref', ref: options.againstRef }
            : { kind: 'recorded' };
      // Loaded when a plan is made, not when the CLI starts (see topology-validate.ts).
      const { readPlanBase, readTopology } = await import('../../engine/api.js');
      const desired = await readTopology(options.file);
      const base = await readPlanBase(options.file, against);
      const planOptions = { refresh: options.refresh !== 'false', replace: options.replace };
      const plan = await withService(options, (service) => service.plan(desired, base, planOptions));
      const format: Format = options.json ? 'json' : options.format;
      const toFile = options.out !== undefined && options.out !== '-';
      let text: string;
      switch (format) {
        case 'json':
          text = renderPlanJson(plan);
          break;
        case 'markdown':
          text = renderPlanMarkdown(plan);
          break;
        case 'text':
          text = renderPlanText(plan, { style: toFile ? plainStyle : styleFor(process.stdout) });
          break;
      }
      await writeOutput(text, options.out);
      if (toFile)
        process.stderr.write(
          `Plan written to ${options.out}. ${countsLine(plan.summary, plan.actions.length)}\n`,
        );
      process.exitCode = options.detailedExitcode && !isEmptyPlan(plan) ? 2 : 0;
    });
}
