/**
 * Issue 18's acceptance for secrets: a migration of components given secrets by reference (a real
 * process on the process driver, a real script on the exec driver, the real router), then a search
 * of every file under the state directory, every CLI output and every API answer for the values.
 * The replica never prints its secret: it answers the SHA-256 of what it got.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type CliResult, runBinary, runCli, tempDir } from '../support/cli.js';
import { killSlots, type Workspace, workspace } from '../support/migrations.js';
import { Api, ServerHarness } from '../support/server.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const distinct = (what: string) => `${what}-${randomBytes(12).toString('hex')}`;

let ws: Workspace | undefined;
const harness = new ServerHarness();
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await harness.cleanup();
  if (ws) {
    await runCli(['topology', 'down', '-f', ws.file], { env: { CUTOVER_STATE_DIR: ws.stateDir } });
    killSlots(ws.stateDir);
    await ws.cleanup();
    ws = undefined;
  }
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** A secrets file outside the workspace (and any Git work tree), mode 0600. */
async function secretsFile(text: string, mode = 0o600): Promise<string> {
  const { dir, cleanup } = await tempDir('cutover-secrets-');
  cleanups.push(cleanup);
  const file = path.join(dir, 'shop.env');
  writeFileSync(file, text, { mode });
  return file;
}

function routeUrl(w: Workspace): string {
  const listen = /listen: (127\.0\.0\.1:\d+)/.exec(readFileSync(w.file, 'utf8'))?.[1];
  return `http://${listen}`;
}

/** Every file under `dir`, recursively (logs of replicas and runners included). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((name) => path.join(dir, name))
    .filter((file) => statSync(file).isFile());
}

describe('secrets', () => {
  it('a migration using secrets leaves their values in no file, no CLI output and no API answer', async () => {
    ws = await workspace('test/fixtures/secrets');
    const first = distinct('db-pw');
    const second = distinct('db-pw-rotated');
    const token = distinct('api-token');
    const values = [first, second, token];
    const file = await secretsFile(`# outside Git\nAPI_TOKEN=${token}\n`);
    const outputs: string[] = [];
    // The binary: where a migration runs, the engine reads secrets from its process's environment
    // (CUTOVER_SECRET_*, CUTOVER_SECRETS_FILE), which an in-process run does not set.
    const cli = async (args: string[], password: string): Promise<CliResult> => {
      const result = await runBinary([...args, '-f', (ws as Workspace).file], {
        env: { CUTOVER_STATE_DIR: (ws as Workspace).stateDir, CUTOVER_SECRET_DB_PASSWORD: password },
      });
      outputs.push(result.stdout, result.stderr);
      return result;
    };
    const withFile = ['--secrets-file', file];
    // What reads no secret (the records of migrations) runs in this process, with the same
    // environment: the same output, without a Node start each.
    const records = async (args: string[]): Promise<CliResult> => {
      const result = await runCli([...args, '-f', (ws as Workspace).file], {
        env: { CUTOVER_STATE_DIR: (ws as Workspace).stateDir, CUTOVER_SECRET_DB_PASSWORD: second },
      });
      outputs.push(result.stdout, result.stderr);
      return result;
    };

    for (const format of ['text', 'json', 'markdown']) {
      expect((await cli(['topology', 'plan', '--format', format, ...withFile], first)).code).toBe(0);
    }
    const migrated = await cli(['topology', 'migrate', '--yes', ...withFile], first);
    expect(migrated.code, migrated.stderr).toBe(0);
    // The replica got the value (it answers its hash through the route), the exec script too.
    expect(await (await fetch(`${routeUrl(ws)}/secret-sha256`)).text()).toBe(sha256(first));
    expect(migrated.stdout + migrated.stderr).toContain(`API_TOKEN sha256 ${sha256(token)}`);

    const same = await cli(['topology', 'plan', '--detailed-exitcode', ...withFile], first);
    expect(same.code).toBe(0);
    expect(same.stdout).toContain('No changes.');

    const rotated = await cli(['topology', 'plan', '--detailed-exitcode', ...withFile], second);
    expect(rotated.code).toBe(2);
    expect(rotated.stdout).toContain('-/+ component api will be replaced green-blue');
    expect(rotated.stdout).toContain('because: env.DB_PASSWORD changed (sensitive)');
    expect(rotated.stdout).not.toContain('component jobs');
    const json = JSON.parse((await cli(['topology', 'plan', '--json', ...withFile], second)).stdout);
    expect(json.resources[0].changes).toEqual([
      { path: 'env.DB_PASSWORD', before: '(sensitive)', after: '(sensitive)', sensitive: true },
    ]);
    const remigrated = await cli(['topology', 'migrate', '--yes', '--json', ...withFile], second);
    expect(remigrated.code, remigrated.stderr).toBe(0);
    expect(await (await fetch(`${routeUrl(ws)}/secret-sha256`)).text()).toBe(sha256(second));
    expect((await cli(['topology', 'plan', '--detailed-exitcode', ...withFile], second)).code).toBe(0);

    const list = await records(['topology', 'migration', 'list', '--json']);
    const ids = JSON.parse(list.stdout) as Array<{ id: string }> | { items: Array<{ id: string }> };
    const migrations = (Array.isArray(ids) ? ids : ids.items).map((m) => m.id);
    expect(migrations).toHaveLength(2);
    await records(['topology', 'migration', 'list']);
    for (const id of migrations) {
      await records(['topology', 'migration', 'show', id]);
      await records(['topology', 'migration', 'show', id, '--json']);
      expect((await records(['topology', 'migration', 'logs', id])).code).toBe(0);
    }

    // What is live, and the way back: status (text and JSON) and a rollback's plan, which is
    // shown and then refused without --yes off a terminal.
    const status = await cli(['topology', 'status'], second);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('api');
    const statusJson = await cli(['topology', 'status', '--json'], second);
    expect(JSON.parse(statusJson.stdout).components.map((c: { name: string }) => c.name)).toEqual([
      'api',
      'jobs',
    ]);
    // With the first password set again, the earlier layout's slot would change: shown, not run.
    const back = await cli(['topology', 'rollback', '--to', 'previous', ...withFile], first);
    expect(back.code).toBe(1);
    expect(back.stderr).toContain('env.DB_PASSWORD changed (sensitive)');
    expect(back.stderr).toContain('refusing to migrate without confirmation');

    // The server on the same state directory, with the secrets where it runs.
    const server = await harness.start({
      stateDir: ws.stateDir,
      workdir: ws.dir,
      env: { CUTOVER_SECRET_DB_PASSWORD: second, CUTOVER_SECRETS_FILE: file },
    });
    const api = await Api.connect(server.url);
    const answers: string[] = [];
    const answer = async (r: Promise<{ status: number; text: string }>, status = 200) => {
      const got = await r;
      expect(got.status, got.text).toBe(status);
      answers.push(got.text);
      return got;
    };
    await answer(api.get('/v1/migrations'));
    for (const id of migrations) {
      await answer(api.get(`/v1/migrations/${id}`));
      await answer(api.get(`/v1/migrations/${id}/logs`));
    }
    const environments = await answer(api.get('/v1/environments'));
    expect(JSON.parse(environments.text).items.map((e: { environment: string }) => e.environment)).toEqual([
      'secrets',
    ]);
    const environment = await answer(api.get('/v1/environments/secrets'));
    expect(JSON.parse(environment.text).components).toHaveLength(2);
    const backPlan = await answer(
      api.post('/v1/environments/secrets/rollback', { to: 'previous', dryRun: true }),
    );
    // The server reads the current (second) password: the layout before is the same, no change.
    expect(JSON.parse(backPlan.text).plan).toMatchObject({ environment: 'secrets', actions: [] });
    const remote = await cli(['topology', 'status', '--json', '--server', server.url], second);
    expect(remote.code, remote.stderr).toBe(0);
    expect(JSON.parse(remote.stdout).environment).toBe('secrets');
    const request = { topology: readFileSync(ws.file, 'utf8'), path: 'topology.yaml' };
    const planned = await answer(api.post('/v1/plan', request));
    expect(JSON.parse(planned.text).actions).toEqual([]);
    const applied = await answer(api.post('/v1/apply', request));
    expect(JSON.parse(applied.text).summary).toBeNull();
    await answer(api.get('/metrics'));
    await server.stop();
    answers.push(server.stdout(), server.stderr());

    const files = filesUnder(ws.stateDir);
    // What the search covers: journals, logs, layouts, the slots' records and replica logs.
    expect(files.some((f) => f.endsWith('journal.ndjson'))).toBe(true);
    expect(files.some((f) => /replica-0\.log$/.test(f))).toBe(true);
    expect(files.some((f) => f.endsWith('layout.json'))).toBe(true);
    for (const value of values) {
      expect(files.filter((f) => readFileSync(f).includes(value))).toEqual([]);
      expect(outputs.filter((o) => o.includes(value))).toEqual([]);
      expect(answers.filter((a) => a.includes(value))).toEqual([]);
    }
  }, 120_000);

  it('a secret set nowhere fails the provision step, naming it and where it was looked for', async () => {
    ws = await workspace('test/fixtures/secrets');
    const file = await secretsFile(`API_TOKEN=${distinct('api-token')}\n`);
    // The binary: the migration reads the secrets file from its process's environment.
    const result = await runBinary(['topology', 'migrate', '-f', ws.file, '--yes', '--secrets-file', file], {
      env: { CUTOVER_STATE_DIR: ws.stateDir },
    });
    expect(result.code).toBe(1);
    expect(result.stdout + result.stderr).toMatch(
      /provision_green:api failed: secret DB_PASSWORD \(env\.DB_PASSWORD of component api\) is not set: looked for \$CUTOVER_SECRET_DB_PASSWORD of process \d+ \(unset\) and the secrets file .*shop\.env; set it where the migration runs/,
    );
  }, 60_000);

  it('a secret no process environment can carry (a NUL byte) is refused by file and line, its value nowhere', async () => {
    ws = await workspace('test/fixtures/secrets');
    // Node's own refusal of such an env value quotes it; cutover must refuse it first, by name.
    const head = distinct('nul-head');
    const file = await secretsFile(`API_TOKEN=${distinct('api-token')}\nDB_PASSWORD=${head}\0tail\n`);
    // The binary: the migration reads the secrets file from its process's environment.
    const result = await runBinary(['topology', 'migrate', '-f', ws.file, '--yes', '--secrets-file', file], {
      env: { CUTOVER_STATE_DIR: ws.stateDir },
    });
    expect(result.code).toBe(1);
    const output = result.stdout + result.stderr;
    expect(output).toMatch(
      /secrets file .*shop\.env:2: the value of DB_PASSWORD holds a NUL byte, which no process environment can carry; correct that line/,
    );
    expect(output).not.toContain(head);
    // Refused before any migration starts: nothing is provisioned or retried with it.
    expect(output).not.toMatch(/provision_green|retry \d of/);
    const files = existsSync(ws.stateDir) ? filesUnder(ws.stateDir) : [];
    expect(files.filter((f) => readFileSync(f).includes(head))).toEqual([]);
  }, 60_000);

  it('refuses a secrets file that other users can read, or that lies in the Git work tree, in one line', async () => {
    ws = await workspace('test/fixtures/secrets');
    const open = await secretsFile('API_TOKEN=x\n', 0o644);
    const plan = (secrets: string) =>
      runCli(['topology', 'plan', '-f', (ws as Workspace).file, '--secrets-file', secrets], {
        env: { CUTOVER_STATE_DIR: (ws as Workspace).stateDir },
      });
    const refused = await plan(open);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      `cutover: secrets file ${open} is open to other users (mode 0644); run chmod 600 ${open}\n`,
    );
    await runGit(ws.dir, ['init', '-q']);
    const inside = path.join(ws.dir, 'shop.env');
    writeFileSync(inside, 'API_TOKEN=x\n', { mode: 0o600 });
    const inTree = await plan(inside);
    expect(inTree.code).toBe(1);
    expect(inTree.stderr).toMatch(
      /^cutover: secrets file .*shop\.env is inside the topology's Git work tree .*; move it outside \(e\.g\. ~\/\.config\/cutover\/\) so it is never committed\n$/,
    );
  }, 60_000);
});

async function runGit(cwd: string, args: string[]): Promise<void> {
  const { execFile } = await import('node:child_process');
  await new Promise<void>((resolve, reject) =>
    execFile('git', args, { cwd }, (error) => (error ? reject(error) : resolve())),
  );
}
