import { type Command, Option } from 'commander';
import { CutoverError } from '../../core/errors.js';
import { type PlannedAgainst, savedPlanOf } from '../../core/plan/saved-plan.js';
import { isEmptyPlan } from '../../core/plan/types.js';
import type { PlanAgainst, PlanBase } from '../../engine/api.js';
import { renderPlanJson } from '../../views/render-plan-json.js';
import { renderPlanMarkdown } from '../../views/render-plan-markdown.js';
import { renderPlanText } from '../../views/render-plan-text.js';
import { countsLine } from '../../views/symbols.js';
import { type CommandRun, pathIn, styleOf } from '../context.js';
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
  commit?: string;
  refresh: 'true' | 'false';
  replace: string[];
}

/** `--replace a --replace b`: every name, in order. */
export function collectNames(name: string, names: string[]): string[] {
  return [...names, name];
}

export function registerPlan(topology: Command, run: CommandRun): void {
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
    .option(
      '--out <file>',
      'save the plan (JSON, against the live layout) for `cutover topology apply FILE`; the rendering still goes to standard output',
    )
    .option(
      '--commit <sha>',
      "with --out: the Git commit the topology comes from (default: the file's HEAD when it is clean there)",
    )
    .addHelpText(
      'after',
      `
Without --against or --against-ref the plan is computed against the layout recorded in the state
directory (.cutover/ beside the file, or CUTOVER_STATE_DIR), or a server's (--server): empty before
the first migration. --out FILE saves that plan, like terraform plan -out: the plan, the topology's
text, its digest, the serial and migration it was planned against, and the commit (--commit, else
the file's Git HEAD when the file is clean there). \`cutover topology apply FILE\` applies exactly it,
or refuses when the live layout moved since (plan again). --out needs the live layout: not with
--against or --against-ref, which plan for review only.
It first observes what runs (replicas alive and answering, routes served, nginx files as written):
what differs from the record is drift, shown under "Changed outside of cutover", and the plan
repairs it. --refresh=false plans from the record alone.

Exit codes: 0 success, 1 error; with --detailed-exitcode: 0 no changes, 1 error, 2 changes or drift.

Examples:
  $ cutover topology plan -f topology.yaml
  $ cutover topology plan -f topology.yaml --detailed-exitcode   # 2: something to change or repair
  $ cutover topology plan -f topology.yaml --refresh=false --replace api
  $ cutover topology plan -f topology.yaml --out plan.json --format markdown > plan.md
  $ cutover topology apply plan.json --yes                       # exactly that plan, or refused
  $ cutover topology plan --against-ref origin/main --format markdown > review.md
  $ cutover topology plan -f after.yaml --against before.yaml --json | jq .summary`,
    )
    .action(run.action((options: PlanOptions) => runPlan(options, run)));
}

async function runPlan(options: PlanOptions, run: CommandRun): Promise<number> {
  if (options.against !== undefined && options.againstRef !== undefined) {
    throw new CutoverError('USAGE', '--against and --against-ref cannot be used together');
  }
  if (options.out === '-') {
    throw new CutoverError(
      'USAGE',
      '--out - : a saved plan goes to a file (the rendering goes to standard output)',
    );
  }
  const toFile = options.out !== undefined;
  if (toFile && (options.against !== undefined || options.againstRef !== undefined)) {
    throw new CutoverError(
      'USAGE',
      `--out ${options.out}: a saved plan is planned against the live layout, so that apply can check it; --against and --against-ref plan for review only (print them with --format)`,
    );
  }
  if (options.commit !== undefined && !toFile) {
    throw new CutoverError('USAGE', '--commit names the commit of a saved plan: give --out FILE too');
  }
  const against: PlanBase =
    options.against !== undefined
      ? { kind: 'file', file: options.against }
      : options.againstRef !== undefined
        ? { kind: 'git-ref', ref: options.againstRef }
        : { kind: 'recorded' };
  // Loaded when a plan is made, not when the CLI starts (see topology-validate.ts).
  const { commitOfFile, readPlanBase, readTopology } = await import('../../engine/api.js');
  // Named as the user wrote it (the plan and a saved plan repeat the name), read where the command runs.
  const file = pathIn(run, options.file);
  const desired = await readTopology(file, options.file);
  const base: PlanAgainst =
    against.kind === 'file'
      ? { kind: 'text', source: await readAgainstFile(readTopology, pathIn(run, against.file), against.file) }
      : atRef(await readPlanBase(file, against), file, options.file);
  const planOptions = { refresh: options.refresh !== 'false', replace: options.replace };
  const { plan, plannedAgainst } = await withService(run, options, async (service) => {
    if (base.kind === 'recorded') {
      const live = await service.planLive(desired, planOptions);
      return { plan: live.plan, plannedAgainst: live.against as PlannedAgainst };
    }
    const described: PlannedAgainst =
      base.kind === 'text' ? { kind: 'topology', source: base.source.file } : { kind: 'empty' };
    return { plan: await service.plan(desired, base, planOptions), plannedAgainst: described };
  });
  if (options.out !== undefined && plannedAgainst.kind === 'live') {
    const saved = savedPlanOf({
      plan,
      plannedAgainst,
      topology: desired,
      commit: options.commit ?? (await commitOfFile(file)),
      createdAt: new Date().toISOString(),
    });
    await writeOutput(`${JSON.stringify(saved, null, 2)}\n`, options.out, run);
    run.stderr.write(
      `Saved to ${options.out}. ${countsLine(plan.summary, plan.actions.length)} Apply exactly it with: cutover topology apply ${options.out}\n`,
    );
  }
  const format: Format = options.json ? 'json' : options.format;
  let text: string;
  switch (format) {
    case 'json':
      text = renderPlanJson(plan);
      break;
    case 'markdown':
      text = renderPlanMarkdown(plan, { against: plannedAgainst });
      break;
    case 'text':
      text = renderPlanText(plan, { style: styleOf(run, run.stdout), against: plannedAgainst });
      break;
  }
  await writeOutput(text, undefined, run);
  return options.detailedExitcode && !isEmptyPlan(plan) ? 2 : 0;
}

/** The file at a Git revision named as the user named the file (`FILE@REF`), not as it was read. */
function atRef(base: PlanAgainst, read: string, name: string): PlanAgainst {
  if (base.kind !== 'text') return base;
  return { ...base, source: { ...base.source, file: `${name}${base.source.file.slice(read.length)}` } };
}

/** The file --against names. Missing, the hint is --against's: the reader's names -f. */
async function readAgainstFile(
  readTopology: typeof import('../../engine/api.js').readTopology,
  file: string,
  name: string,
) {
  try {
    return await readTopology(file, name);
  } catch (error) {
    if (error instanceof CutoverError && error.code === 'TOPOLOGY_NOT_FOUND')
      throw new CutoverError(
        'TOPOLOGY_NOT_FOUND',
        `${name}: no such file (the topology to plan against, from --against FILE)`,
      );
    throw error;
  }
}
