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
    .option('--detailed-exitcode', 'exit 0 when there are no changes, 2 when there are, 1 on error')
    .option('--out <file>', 'write the plan to a file instead of standard output')
    .addHelpText(
      'after',
      `
Without --against or --against-ref the plan is computed against the layout recorded in the state
directory (.cutover/ beside the file, or CUTOVER_STATE_DIR): empty before the first migration.

Exit codes: 0 success, 1 error; with --detailed-exitcode: 0 no changes, 1 error, 2 changes.

Examples:
  $ cutover topology plan -f topology.yaml
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
      const plan = await withService(options, (service) => service.plan(desired, base));
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
