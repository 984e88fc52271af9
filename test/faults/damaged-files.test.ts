/**
 * Damaged files of the state directory: the claim, a journal and the layout, each emptied,
 * truncated or filled with something else (a disk that lost a write, an editor, a power loss), as
 * the real CLI then finds them. Each case says what a user sees (one line naming the file and the
 * next step, never an internal error) and that following that step reaches the target layout.
 * The first `migrate` after an emptied file, and the crash that cuts a journal's line (a SIGKILL),
 * are real processes; the other damages are met by the CLI run in this process.
 */
import { copyFileSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, type ExpectStatic, expect, it } from 'vitest';
import type { Sandbox } from '../e2e/harness.js';
import {
  baseTemplate,
  errorLines,
  listAll,
  migrateArgs,
  processState,
  recover,
  runWithFault,
  sandboxFrom,
  scriptsWithoutPause,
  tempFiles,
} from './support.js';

let template: Sandbox;
let baseId: string;
let restoreEnv: () => void;
let processBefore: ReturnType<typeof processState>;
beforeAll(async () => {
  processBefore = processState();
  restoreEnv = scriptsWithoutPause();
  ({ template, baseId } = await baseTemplate());
}, 30_000);
afterAll(async () => {
  restoreEnv?.();
  await template?.cleanup();
  expect(processState(), 'the in-process commands changed the test process').toEqual(processBefore);
});

type Damage = (file: string) => void;
const damages: Record<string, Damage> = {
  emptied: (file) => writeFileSync(file, ''),
  'truncated half way': (file) => truncateSync(file, Math.floor(readFileSync(file).length / 2)),
  'overwritten with bytes that are not JSON': (file) =>
    writeFileSync(file, Buffer.from([0, 0xff, 0x13, 0x37])),
  'valid JSON of the wrong shape': (file) => writeFileSync(file, '{"hello": 1}\n'),
};

interface Case {
  name: string;
  /** Damages the state of `sb` (its base layout, plus whatever the case prepares). */
  damage: (sb: Sandbox, how: Damage) => Promise<void>;
  /** What the first `migrate` after the damage shows; then the case's way back. */
  expectFirst: (
    run: { code: number | null; stderr: string; stdout: string },
    sb: Sandbox,
    expect: ExpectStatic,
  ) => void;
  repair?: (sb: Sandbox) => void;
}

const claimFile = (sb: Sandbox) => path.join(sb.environmentDir(), 'active.json');

const cases: Case[] = [
  {
    name: 'the claim (active.json), nothing in flight',
    damage: async (sb, how) => {
      writeFileSync(
        claimFile(sb),
        `${JSON.stringify({ migrationId: 'mig_x', claimedAt: 0, claimedBy: { pid: 1, startTime: '0' } })}\n`,
      );
      how(claimFile(sb));
    },
    expectFirst: (run, sb, expect) => {
      // Valid JSON of the wrong shape and a half claim are as unreadable as an empty one.
      expect(run.stderr).toContain(`cutover: ${claimFile(sb)} could not be read`);
      expect(run.stdout).toMatch(/: completed$/m);
    },
  },
  {
    name: 'an old, completed journal',
    damage: async (sb, how) => {
      const journal = sb.journalFile(baseId);
      const lines = readFileSync(journal, 'utf8').split('\n');
      // The first lines: a damage at the end would be a torn last line, which is not damage.
      const head = `${lines.slice(0, 2).join('\n')}\n`;
      writeFileSync(journal, head);
      how(journal);
      writeFileSync(journal, `${readFileSync(journal, 'utf8')}\n${lines.slice(2).join('\n')}`);
    },
    expectFirst: (run, _sb, expect) => {
      expect(run.stdout).toMatch(/: completed$/m);
    },
  },
  {
    name: 'the layout (layout.json)',
    damage: async (sb, how) => how(path.join(sb.environmentDir(), 'layout.json')),
    expectFirst: (run, sb, expect) => {
      expect(run.code).toBe(1);
      const layout = path.join(sb.environmentDir(), 'layout.json');
      expect(errorLines(run.stderr).lines).toEqual([
        expect.stringMatching(
          new RegExp(
            `^cutover: ${layout}: .*; the history keeps the last committed layouts: copy the newest file of ${path.join(sb.environmentDir(), 'layouts')} over it$`,
          ),
        ),
      ]);
    },
    repair: (sb) =>
      copyFileSync(
        path.join(sb.environmentDir(), 'layouts', '1.json'),
        path.join(sb.environmentDir(), 'layout.json'),
      ),
  },
];

describe.concurrent('damaged state files', () => {
  it.for(cases.flatMap((c) => Object.entries(damages).map(([how, damage]) => ({ ...c, how, hurt: damage }))))(
    '$name, $how',
    { timeout: 60_000 },
    async (c, { expect }) => {
      const sb = await sandboxFrom(template);
      try {
        await c.damage(sb, c.hurt);
        // One damage per file as the real process (its exit code and stderr), the others in-process.
        const first = c.how === 'emptied' ? await sb.cli(migrateArgs) : await sb.inProcess(migrateArgs);
        const errors = errorLines(first.stderr);
        expect(errors, first.stderr).toMatchObject({ trace: false, internal: false });
        c.expectFirst(first, sb, expect);
        const listed = await listAll(sb);
        expect(listed.code, listed.stderr).toBe(0);
        c.repair?.(sb);
        const seen = await recover(sb, baseId);
        expect(
          Object.values(sb.layout().slots).map((s) => s.version),
          seen.join('\n'),
        ).toEqual(['2', '2', '2']);
        expect(tempFiles(sb.stateDir)).toEqual([]);
      } finally {
        await sb.cleanup();
      }
    },
  );

  it('an in-flight journal whose last line was cut by a crash: resume cuts it off and finishes', async ({
    expect,
  }) => {
    const sb = await sandboxFrom(template);
    try {
      const killed = await runWithFault(sb, migrateArgs, {
        op: 'fsync',
        path: 'journal\\.ndjson$',
        nth: 5,
        fault: 'SIGKILL',
      });
      expect(killed.signal).toBe('SIGKILL');
      const id = (await listAll(sb)).list.find((m) => m.id !== baseId)?.id as string;
      const journal = sb.journalFile(id);
      truncateSync(journal, readFileSync(journal).length - 7);
      const seen = await recover(sb, baseId);
      expect(
        Object.values(sb.layout().slots).map((s) => s.version),
        seen.join('\n'),
      ).toEqual(['2', '2', '2']);
      const after = await listAll(sb);
      expect(after.list.find((m) => m.id === id)?.lifecycle).toBe('completed');
    } finally {
      await sb.cleanup();
    }
  });
});
