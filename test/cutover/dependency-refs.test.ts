/**
 * Components find their dependencies in their own slot, end to end: real processes, the real
 * router, real HTTP on loopback, the real CLI. `api` knows `db` only through the references in its
 * env (DATABASE_URL, DB_ADDRESSES: test/fixtures/refs); each answer of api carries the slot of the
 * api that answered and the answer of the db it reached, so the test tells which database every
 * answer came from.
 *
 * - api and db both replaced: while the route holds at 50 %, green api (through the preview) answers
 *   from green db only, and through the route every answer comes from a pair of one generation (blue
 *   api from blue db, green api from green db), both seen; after the commit, from the new db;
 * - db alone replaced: the plan replaces api too and says why; api's green talks to db's green;
 * - rolled back at the hold: blue api still answers from blue db, and green is gone.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import {
  isFinal,
  killSlots,
  type Summary,
  type Workspace,
  waitFor,
  workspace,
} from '../support/migrations.js';

interface Answer {
  api: { version: string; slotId: string };
  db: { component: 'db'; version: string; slotId: string; port: number };
  dbAddresses: string;
}

let w: Workspace;
let route: string;
let preview: string;

beforeAll(async () => {
  w = await workspace('test/fixtures/refs');
  const text = readFileSync(w.file, 'utf8');
  route = `http://${/listen: (127\.0\.0\.1:\d+)/.exec(text)?.[1]}/`;
  preview = `http://${/preview: (127\.0\.0\.1:\d+)/.exec(text)?.[1]}/`;
}, 30_000);

afterAll(async () => {
  await runCli(['topology', 'down', '-f', w.file, '--yes']).catch(() => undefined);
  // A test that failed half way may leave a migration in flight, which down refuses: its slots too.
  killSlots(w.stateDir);
  await w.cleanup();
}, 60_000);

function setVersions(versions: { api?: string; db?: string }): void {
  let text = readFileSync(w.file, 'utf8');
  for (const [component, version] of Object.entries(versions)) {
    text = text.replace(
      new RegExp(`(\\n  ${component}:\\n(?:    .*\\n)*?    version: )"[^"]*"`),
      `$1"${version}"`,
    );
  }
  writeFileSync(w.file, text);
}

async function ask(url: string, n: number): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let i = 0; i < n; i++) {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    const body = await response.text();
    expect(response.status, body).toBe(200);
    answers.push(JSON.parse(body) as Answer);
  }
  return answers;
}

/** `api-mig_x` → `mig_x`: the migration that stood the slot up (its generation). */
const generation = (slotId: string) => slotId.slice(slotId.indexOf('-') + 1);

/** Every answer came from a db of the same generation as the api that gave it, on one of its addresses. */
function expectPaired(answers: Answer[]): void {
  for (const a of answers) {
    expect(generation(a.db.slotId), JSON.stringify(a)).toBe(generation(a.api.slotId));
    expect(a.dbAddresses.split(','), JSON.stringify(a)).toContain(`127.0.0.1:${a.db.port}`);
  }
}

async function migrateToHold(): Promise<string> {
  const started = await runCli(['topology', 'migrate', '-f', w.file, '--yes', '--json']);
  expect(started.code, started.stderr).toBe(0);
  const { id, lifecycle } = (JSON.parse(started.stdout) as { summary: Summary }).summary;
  expect(lifecycle).toBe('awaiting_promotion');
  return id;
}

async function promoteToEnd(id: string): Promise<void> {
  const promote = await runCli(['topology', 'migration', 'promote', id, '--full', '-f', w.file]);
  expect(promote.code, promote.stderr).toBe(0);
  const end = await waitFor(w, id, isFinal, 60_000);
  expect(end.lifecycle, end.reason ?? '').toBe('completed');
}

describe('components find their dependencies in their own slot', () => {
  let first = '';
  let second = '';
  let third = '';

  it('the first layout: api answers from db through the route', async () => {
    const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes', '--json']);
    expect(result.code, result.stderr).toBe(0);
    // The first layout has no blue: its new route is created, the shift's hold is not for it.
    const summary = (JSON.parse(result.stdout) as { summary: Summary }).summary;
    expect(summary.lifecycle).toBe('completed');
    first = summary.id;
    const answers = await ask(route, 4);
    expectPaired(answers);
    for (const a of answers) {
      expect(a.api).toEqual({ version: '1.0.0', slotId: `api-${first}` });
      expect(a.db).toMatchObject({ version: '1.0.0', slotId: `db-${first}` });
    }
    // Two db replicas: {addresses} names both.
    expect(answers[0]?.dbAddresses.split(',')).toHaveLength(2);
  }, 90_000);

  it('api and db replaced: green api talks to green db, blue api to blue db, then the new db only', async () => {
    setVersions({ api: '2.0.0', db: '2.0.0' });
    second = await migrateToHold();
    // Green, through the route's preview listener: green api, from green db, only.
    const green = await ask(preview, 10);
    expectPaired(green);
    for (const a of green) {
      expect(a.api).toEqual({ version: '2.0.0', slotId: `api-${second}` });
      expect(a.db).toMatchObject({ version: '2.0.0', slotId: `db-${second}` });
    }
    // The route at 50 %: both generations answer, each from its own db.
    const mixed = await ask(route, 40);
    expectPaired(mixed);
    const versions = new Set(mixed.map((a) => `${a.api.version}/${a.db.version}`));
    expect([...versions].sort()).toEqual(['1.0.0/1.0.0', '2.0.0/2.0.0']);
    expect(
      mixed.filter((a) => a.db.slotId === `db-${first}`).every((a) => a.api.slotId === `api-${first}`),
    ).toBe(true);
    await promoteToEnd(second);
    const after = await ask(route, 10);
    expectPaired(after);
    for (const a of after) expect(a.db).toMatchObject({ version: '2.0.0', slotId: `db-${second}` });
  }, 120_000);

  it('db alone replaced: the plan replaces api too, saying why, and api follows the new db', async () => {
    setVersions({ db: '3.0.0' });
    const plan = await runCli(['topology', 'plan', '-f', w.file]);
    expect(plan.stdout).toContain(
      '-/+ component api will be replaced green-blue\n      because: dependency db is replaced (env DATABASE_URL, DB_ADDRESSES refer to it)',
    );
    const json = JSON.parse((await runCli(['topology', 'plan', '-f', w.file, '--json'])).stdout) as {
      resources: { name: string; change: string; reason: string }[];
    };
    expect(json.resources.map((r) => `${r.name} ${r.change}`)).toEqual(['api replace', 'db replace']);
    third = await migrateToHold();
    const green = await ask(preview, 10);
    expectPaired(green);
    for (const a of green) {
      // The same api version, in a new slot, on the new db.
      expect(a.api).toEqual({ version: '2.0.0', slotId: `api-${third}` });
      expect(a.db).toMatchObject({ version: '3.0.0', slotId: `db-${third}` });
    }
    const mixed = await ask(route, 40);
    expectPaired(mixed);
    expect(new Set(mixed.map((a) => a.db.version))).toEqual(new Set(['2.0.0', '3.0.0']));
    await promoteToEnd(third);
    const after = await ask(route, 10);
    expectPaired(after);
    for (const a of after) expect(a.db).toMatchObject({ version: '3.0.0', slotId: `db-${third}` });
  }, 120_000);

  it('rolled back at the hold: blue api answers from blue db, as before', async () => {
    setVersions({ api: '4.0.0', db: '4.0.0' });
    const fourth = await migrateToHold();
    expect((await ask(preview, 4)).map((a) => a.db.slotId)).toEqual(Array(4).fill(`db-${fourth}`));
    const rollback = await runCli(['topology', 'migration', 'rollback', fourth, '-f', w.file]);
    expect(rollback.code, rollback.stderr).toBe(0);
    const end = await waitFor(w, fourth, isFinal, 60_000);
    expect(end.lifecycle, end.reason ?? '').toBe('rolled_back');
    const after = await ask(route, 20);
    expectPaired(after);
    for (const a of after) {
      expect(a.api.slotId).toBe(`api-${third}`);
      expect(a.db).toMatchObject({ version: '3.0.0', slotId: `db-${third}` });
    }
  }, 120_000);
});
