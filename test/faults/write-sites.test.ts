/**
 * The fault-injection suite: every write site of the state directory that a migration passes
 * through (claim, journal, runner record, layout, and the log and process records beside them),
 * each failed with ENOSPC and EACCES where the kernel can answer so, and at a few sites per area
 * followed by a SIGKILL right after it succeeded. The sites were enumerated from a trace of a whole
 * `migrate` of test/fixtures/slow-exec (CUTOVER_TEST_FAULT_TRACE of
 * test/fixtures/preload/inject-fault.mjs).
 *
 * After each fault, what a user sees and what is left must be clear: the command ended (never a
 * hang), with at most one `cutover:` line naming the file or the state directory and the next step
 * (no stack trace, no "internal error"); no temp file left; `migration list` works; and resuming or
 * migrating again brings the environment to the target layout exactly once: nothing lost.
 *
 * SIGKILL is kept where the kill leaves a state of its own on disk (`kill: true` below, one or two
 * sites per area): a temp file left empty or written and never linked, a claim or runner record
 * linked but naming a dead process, a lock left by a dead process, a migration directory with no
 * journal, the journal cut at the commit, the layout renamed into place before the journal records
 * it, the log and the process record. The other SIGKILLs are not run, because what they leave is
 * one of those states or a journal boundary: a kill after an fsync leaves what a kill after the
 * write before it leaves (a process kill keeps the page cache; fsync only matters on a power loss),
 * a kill after a temp file is opened or written leaves a temp file as at the kept site of the same
 * kind, and a kill after a journal event is a journal boundary, swept after every event in process
 * by test/engine/runner/crash-sweep.test.ts and by real SIGKILLs of the runner at the boundaries the
 * sweep cannot stop at in test/e2e/crash.test.ts.
 *
 * Where each case runs: the ENOSPC and EACCES cases in this process (the CLI's `main`, node:fs
 * wrapped here: `InProcessFaults` of ./support.ts), without a Node start each; the SIGKILLs, and
 * the ENOSPC of the sites marked `real` (one mid-run stop, one at the runner record), as the real
 * CLI process with the preload, so that what only a process shows (its exit code, its stderr, a
 * record naming a dead pid) is still checked at the process boundary. What follows the fault
 * (`recover`: list, resume, logs, show, migrate again) runs in this process in both; the runner
 * that `resume` starts is a real process.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, type ExpectStatic, expect, it } from 'vitest';
import type { Sandbox } from '../e2e/harness.js';
import {
  baseTemplate,
  errorLines,
  type FaultKind,
  type FaultOp,
  type FaultRun,
  finalLifecycles,
  InProcessFaults,
  listAll,
  migrateArgs,
  processState,
  recover,
  runWithFault,
  sandboxFrom,
  scriptsWithoutPause,
  tempFiles,
} from './support.js';

interface Site {
  /** What is being written, for the test name and docs/reliability.md. */
  name: string;
  op: FaultOp;
  path: string;
  nth: number;
  /** Also SIGKILLed right after it succeeds (see the header for which sites and why). */
  kill?: true;
  /** Its ENOSPC runs as a real process too (see the header). */
  real?: true;
}

/** writeTemp's name (platform/claim-lock.ts): `<file>.<pid>.<ms>.<random hex>.tmp`. */
const tmp = '\\.\\d+\\.\\d+\\.[0-9a-f]+\\.tmp$';
const journal = 'journal\\.ndjson$';
/** Events of topology.yaml's journal: 1 created, 2–4 provision, 5 replicate, 6–8 health, 9–11 drain (11 commits), 12 layout recorded, 13–15 retire. */
const sites: Site[] = [
  { name: 'claim: environment directory created', op: 'mkdir', path: 'environments/crash$', nth: 1 },
  { name: 'claim: temp file created', op: 'open', path: `active\\.json${tmp}`, nth: 1 },
  { name: 'claim: temp file written', op: 'write', path: `active\\.json${tmp}`, nth: 1, kill: true },
  { name: 'claim: temp file fsync', op: 'fsync', path: `active\\.json${tmp}`, nth: 1 },
  { name: 'claim: linked into place', op: 'link', path: 'active\\.json$', nth: 1, kill: true },
  {
    name: 'claim: lock taken to release it',
    op: 'symlink',
    path: 'active\\.json\\.lock$',
    nth: 1,
    kill: true,
  },
  { name: 'claim: removed at the end', op: 'unlink', path: 'active\\.json$', nth: 1 },
  {
    name: 'journal: migration directory created',
    op: 'mkdir',
    path: 'migrations/mig_\\w+$',
    nth: 1,
    kill: true,
  },
  { name: 'journal: created', op: 'open', path: journal, nth: 1 },
  { name: 'journal: first line written', op: 'write', path: journal, nth: 1 },
  { name: 'journal: first line fsync', op: 'fsync', path: journal, nth: 1 },
  { name: 'journal: reopened by the runner', op: 'open', path: journal, nth: 2 },
  { name: 'journal: a provision result written', op: 'write', path: journal, nth: 3, real: true },
  { name: 'journal: a health result fsync', op: 'fsync', path: journal, nth: 7 },
  { name: 'journal: the event that commits written', op: 'write', path: journal, nth: 11, kill: true },
  { name: 'journal: the layout-recorded event fsync', op: 'fsync', path: journal, nth: 12 },
  { name: 'journal: the last event written', op: 'write', path: journal, nth: 15 },
  { name: 'journal: the last event fsync', op: 'fsync', path: journal, nth: 15 },
  { name: 'runner record: temp file created', op: 'open', path: `runner\\.json${tmp}`, nth: 1, kill: true },
  {
    name: 'runner record: temp file written',
    op: 'write',
    path: `runner\\.json${tmp}`,
    nth: 1,
    real: true,
  },
  { name: 'runner record: temp file fsync', op: 'fsync', path: `runner\\.json${tmp}`, nth: 1 },
  { name: 'runner record: linked into place', op: 'link', path: 'runner\\.json$', nth: 1, kill: true },
  { name: 'runner record: lock taken to release it', op: 'symlink', path: 'runner\\.json\\.lock$', nth: 1 },
  { name: 'runner record: removed at the end', op: 'unlink', path: 'runner\\.json$', nth: 1 },
  { name: 'layout history: directory created', op: 'mkdir', path: 'layouts$', nth: 1 },
  {
    name: 'layout history: temp file created',
    op: 'open',
    path: 'layouts/\\d+\\.json\\.\\d+\\.tmp$',
    nth: 1,
  },
  {
    name: 'layout history: temp file written',
    op: 'write',
    path: 'layouts/\\d+\\.json\\.\\d+\\.tmp$',
    nth: 1,
    kill: true,
  },
  { name: 'layout history: temp file fsync', op: 'fsync', path: 'layouts/\\d+\\.json\\.\\d+\\.tmp$', nth: 1 },
  { name: 'layout history: renamed into place', op: 'rename', path: 'layouts/\\d+\\.json$', nth: 1 },
  { name: 'layout history: directory fsync', op: 'fsync', path: 'layouts$', nth: 1 },
  { name: 'layout: temp file created', op: 'open', path: 'layout\\.json\\.\\d+\\.tmp$', nth: 1 },
  { name: 'layout: temp file written', op: 'write', path: 'layout\\.json\\.\\d+\\.tmp$', nth: 1 },
  { name: 'layout: temp file fsync', op: 'fsync', path: 'layout\\.json\\.\\d+\\.tmp$', nth: 1 },
  { name: 'layout: renamed into place', op: 'rename', path: 'layout\\.json$', nth: 1, kill: true },
  { name: 'layout: directory fsync', op: 'fsync', path: 'environments/crash$', nth: 1 },
  { name: 'log: a line appended', op: 'write', path: 'log\\.ndjson$', nth: 3, kill: true },
  { name: 'process record: written', op: 'open', path: 'processes/\\d+\\.json$', nth: 1, kill: true },
];

/** The kernel answers EACCES on path operations only; ENOSPC on anything that may allocate. */
function faultsFor(site: Site): FaultKind[] {
  const path = ['open', 'mkdir', 'link', 'symlink', 'rename', 'unlink'].includes(site.op);
  return [
    ...(site.op === 'unlink' ? [] : ['ENOSPC' as const]),
    ...(path ? ['EACCES' as const] : []),
    ...(site.kill ? ['SIGKILL' as const] : []),
  ];
}

const cases = sites.flatMap((site) => faultsFor(site).map((fault) => ({ site, fault })));

let template: Sandbox;
let baseId: string;
let inProcess: InProcessFaults;
let restoreEnv: () => void;
let processBefore: ReturnType<typeof processState>;
beforeAll(async () => {
  processBefore = processState();
  restoreEnv = scriptsWithoutPause();
  inProcess = await InProcessFaults.install();
  ({ template, baseId } = await baseTemplate());
}, 30_000);
afterAll(async () => {
  inProcess?.uninstall();
  restoreEnv?.();
  await template?.cleanup();
  expect(processState(), 'the in-process commands changed the test process').toEqual(processBefore);
});
/** The next steps the CLI's lines may name. */
const nextStep = /free some space|check the owner and mode|use a writable directory|resume mig_\w+/;

describe.concurrent('faults at every write site of the state directory', () => {
  it.for(cases.map((c) => ({ ...c, name: c.site.name })))(
    '$name: $fault',
    { timeout: 90_000 },
    async ({ site, fault }, { expect }) => {
      const sb = await sandboxFrom(template);
      try {
        await check(sb, site, fault, expect);
      } finally {
        await sb.cleanup();
      }
    },
  );
});

/** The faulted migrate: a real process for a SIGKILL and the `real` sites' ENOSPC, else in this process. */
function faulted(sb: Sandbox, site: Site, fault: FaultKind): Promise<FaultRun> {
  const spec = { op: site.op, path: site.path, nth: site.nth };
  if (fault === 'SIGKILL' || (site.real && fault === 'ENOSPC')) {
    return runWithFault(sb, migrateArgs, { ...spec, fault });
  }
  return inProcess.run(sb, migrateArgs, { ...spec, fault });
}

async function check(sb: Sandbox, site: Site, fault: FaultKind, expect: ExpectStatic): Promise<void> {
  const run = await faulted(sb, site, fault);
  const context = `stderr:\n${run.stderr}\nstdout:\n${run.stdout}`;
  expect(run.fired, `the site was never reached\n${context}`).not.toBe('');
  expect(run.timedOut, `migrate did not end\n${context}`).toBe(false);
  if (fault === 'SIGKILL') {
    expect(run.signal).toBe('SIGKILL');
  } else {
    const errors = errorLines(run.stderr);
    expect(errors, context).toMatchObject({ trace: false, internal: false });
    if (run.code === 0) {
      expect(run.stdout, context).toMatch(/: completed$/m);
    } else {
      expect(run.code, context).toBe(1);
      expect(errors.lines, context).toHaveLength(1);
      expect(errors.lines[0], context).toContain(sb.stateDir);
      expect(errors.lines[0], context).toMatch(nextStep);
    }
    expect(tempFiles(sb.stateDir), context).toEqual([]);
  }
  const listed = await listAll(sb);
  expect({ code: listed.code, trace: errorLines(listed.stderr).trace }, listed.stderr).toEqual({
    code: 0,
    trace: false,
  });

  const seen = await recover(sb, baseId, listed);
  const after = await listAll(sb);
  const target = after.list.filter((m) => m.id !== baseId);
  const summary = `${seen.join('\n')}\n${JSON.stringify(target)}`;
  // Nothing lost, nothing twice: one completed migration to the target, none left in flight,
  // the layout at serial 2 with its history, no temp file, no claim.
  expect(
    target.filter((m) => m.lifecycle === 'completed'),
    summary,
  ).toHaveLength(1);
  expect(
    target.filter((m) => !finalLifecycles.includes(m.lifecycle)),
    summary,
  ).toEqual([]);
  const layout = sb.layout();
  expect(
    { serial: layout.serial, versions: Object.values(layout.slots).map((s) => s.version) },
    summary,
  ).toEqual({
    serial: 2,
    versions: ['2', '2', '2'],
  });
  expect(sb.layoutHistory(), summary).toEqual([1, 2]);
  expect(tempFiles(sb.stateDir), summary).toEqual([]);
  // The claim is released, or names a migration that has ended (stale: the next one replaces it).
  const claim = path.join(sb.environmentDir(), 'active.json');
  if (existsSync(claim)) {
    const holder = (JSON.parse(readFileSync(claim, 'utf8')) as { migrationId: string }).migrationId;
    expect(after.list.find((m) => m.id === holder)?.lifecycle, summary).toBe('completed');
  }
}
