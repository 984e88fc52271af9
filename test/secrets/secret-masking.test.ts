/**
 * Issue 26, items 7 to 9: what a component or a hook prints, and the credentials in a hook's and
 * a notify target's URL, stay where they belong. Real replicas (process driver), the real router,
 * a real command hook, real HTTP hook and webhook receivers on loopback, the real server.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type CliResult, runCli, tempDir } from '../support/cli.js';
import { killSlots, type Workspace, workspace } from '../support/migrations.js';
import { Api, ServerHarness } from '../support/server.js';
import { eventually } from '../support/wait.js';

const distinct = (what: string) => `${what}${randomBytes(10).toString('hex')}`;

interface Received {
  url: string;
  body: string;
  authorization: string | undefined;
}

/** A loopback receiver: answers 200 to every request and keeps what it got. */
async function receiver(): Promise<{ port: number; got: Received[]; close: () => Promise<void> }> {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    req.on('end', () => {
      got.push({ url: req.url ?? '', body, authorization: req.headers.authorization });
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    got,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((name) => path.join(dir, name))
    .filter((file) => statSync(file).isFile());
}

/** The names of a live process's environment variables, and the text of their values. */
function environOf(pid: number): string {
  return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').join('\n');
}

const modeOf = (file: string) => statSync(file).mode & 0o777;

let ws: Workspace | undefined;
const harness = new ServerHarness();
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await harness.cleanup();
  if (ws) {
    await runCli(['topology', 'down', '-f', ws.file, '--yes'], { env: { CUTOVER_STATE_DIR: ws.stateDir } });
    killSlots(ws.stateDir);
    await ws.cleanup();
    ws = undefined;
  }
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

interface Setup {
  crash: boolean;
  hooks: boolean;
  notifyUrl: string;
  out: string;
}

function edit(setup: Setup): (yaml: string) => string {
  return (yaml) => {
    let text = yaml.replace('http://127.0.0.1:9/NOTIFY_URL', setup.notifyUrl).replaceAll('@OUT@', setup.out);
    if (setup.crash) text = text.replace('command: [node, app.js]', 'command: [sh, crash.sh]');
    if (!setup.hooks) text = text.slice(0, text.indexOf('strategy:'));
    return text;
  };
}

describe('secret masking', () => {
  it('a replica that prints its password and exits: the password is masked in the journal, the log and the notifications', async () => {
    const password = distinct('pw-');
    const notifyKey = distinct('nk-');
    const notified = await receiver();
    cleanups.push(notified.close);
    ws = await workspace(
      'test/fixtures/secret-leaks',
      edit({
        crash: true,
        hooks: false,
        notifyUrl: `http://127.0.0.1:${notified.port}/events`,
        out: '/dev/null',
      }),
    );
    const result = await runCli(['topology', 'migrate', '-f', ws.file, '--yes'], {
      env: {
        CUTOVER_STATE_DIR: ws.stateDir,
        CUTOVER_SECRET_DB_PASSWORD: password,
        CUTOVER_SECRET_NOTIFY_KEY: notifyKey,
      },
    });
    expect(result.code).toBe(1);
    const isFailure = (r: Received) => /migration\.(failed|rolled_back)/.test(r.body);
    await eventually(() => notified.got.some(isFailure), 20_000);
    const failed = notified.got.find(isFailure) as Received;
    // The replica's words are copied on, its password masked in each copy.
    expect(failed.body).toContain('authentication failed for (sensitive)');
    expect(failed.body).not.toContain(password);
    const migrations = path.join(ws.stateDir, 'environments', 'leaks', 'migrations');
    const [id] = readdirSync(migrations);
    const dir = path.join(migrations, id as string);
    for (const name of ['journal.ndjson', 'log.ndjson', 'notifications.ndjson']) {
      const text = readFileSync(path.join(dir, name), 'utf8');
      expect(text, name).not.toContain(password);
    }
    expect(readFileSync(path.join(dir, 'journal.ndjson'), 'utf8')).toContain(
      'authentication failed for (sensitive)',
    );
    expect(result.stdout + result.stderr).not.toContain(password);
    expect(notified.got.map((r) => r.body).filter((b) => b.includes(password))).toEqual([]);
    // The replica's own log too: what it printed, masked.
    const slots = path.join(ws.stateDir, 'environments', 'leaks', 'slots');
    const logs = readdirSync(slots, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.log'));
    expect(logs.length).toBeGreaterThan(0);
    for (const log of logs) {
      const text = readFileSync(path.join(slots, log), 'utf8');
      expect(text, log).toContain('authentication failed for (sensitive)');
      expect(text, log).not.toContain(password);
    }
  }, 60_000);

  it('a secret printed by a replica and a hook, credentials in a hook URL and a notify URL: in no state file, log, answer, payload or environment that does not need them', async () => {
    const values = {
      password: distinct('pw-'),
      hookToken: distinct('ht-'),
      hookPassword: distinct('hp-'),
      hookQuery: distinct('hq-'),
      notifyKey: distinct('nk-'),
      notifyPassword: distinct('np-'),
      notifyQuery: distinct('nq-'),
    };
    const hookReceiver = await receiver();
    const notified = await receiver();
    cleanups.push(hookReceiver.close, notified.close);
    const scratch = await tempDir('cutover-masking-');
    cleanups.push(scratch.cleanup);
    const out = path.join(scratch.dir, 'hook-env.json');
    const notifyUrl = `http://ops:${values.notifyPassword}@127.0.0.1:${notified.port}/events?token=${values.notifyQuery}`;
    const setup: Setup = { crash: false, hooks: false, notifyUrl, out };
    let full = '';
    ws = await workspace('test/fixtures/secret-leaks', (yaml) => {
      full = yaml;
      return edit(setup)(yaml);
    });
    const env = {
      CUTOVER_STATE_DIR: ws.stateDir,
      CUTOVER_SECRET_DB_PASSWORD: values.password,
      CUTOVER_SECRET_HOOK_TOKEN: values.hookToken,
      CUTOVER_SECRET_HOOK_URL: `http://hooker:${values.hookPassword}@127.0.0.1:${hookReceiver.port}/check?token=${values.hookQuery}`,
      CUTOVER_SECRET_NOTIFY_KEY: values.notifyKey,
      CUTOVER_SECRET_NOTIFY_URL: notifyUrl,
    };
    const outputs: string[] = [];
    const cli = async (args: string[]): Promise<CliResult> => {
      const result = await runCli([...args, '-f', (ws as Workspace).file], { env });
      outputs.push(result.stdout, result.stderr);
      return result;
    };
    // Credentials written in the topology's notify URL are refused, naming where, before anything
    // is recorded; the URL as a secret reference is what runs.
    const inline = await cli(['topology', 'migrate', '--yes']);
    expect(inline.code).not.toBe(0);
    expect(inline.stderr).toMatch(
      /topology\.yaml:\d+:\d+ notify\.ops\.url: holds a credential in plain text \(its user info, its query parameter token\).*url: \{ secret: NAME \}/,
    );
    const bySecret = (hooks: boolean) =>
      edit({ ...setup, hooks })(full).replace(`url: "${notifyUrl}"`, 'url: { secret: NOTIFY_URL }');
    writeFileSync(ws.file, bySecret(false));
    // Blue first (no hooks), then a change whose preRollout hooks run: the HTTP one passes, the
    // command one prints its token and fails, and the migration rolls back to blue.
    const first = await cli(['topology', 'migrate', '--yes']);
    expect(first.code, first.stderr).toBe(0);
    writeFileSync(ws.file, bySecret(true).replace('version: "1"', 'version: "2"'));
    const second = await cli(['topology', 'migrate', '--yes']);
    expect(second.code).toBe(1);
    expect(second.stdout + second.stderr).toContain('smoke test refused with token (sensitive)');

    // The HTTP hook was called with its URL's credentials; the command hook got its own token only.
    expect(hookReceiver.got).toHaveLength(1);
    expect(hookReceiver.got[0]?.url).toBe(`/check?token=${values.hookQuery}`);
    const basic = Buffer.from(`hooker:${values.hookPassword}`).toString('base64');
    expect(hookReceiver.got[0]?.authorization).toBe(`Basic ${basic}`);
    const hookEnv = JSON.parse(readFileSync(out, 'utf8')) as string[];
    expect(hookEnv).toContain('HOOK_TOKEN');
    expect(hookEnv.filter((k) => k.startsWith('CUTOVER_SECRET') || k === 'CUTOVER_SECRETS_FILE')).toEqual([]);
    await eventually(() => notified.got.some((r) => r.body.includes('migration.rolled_back')), 20_000);
    expect(notified.got[0]?.authorization).toBe(
      `Basic ${Buffer.from(`ops:${values.notifyPassword}`).toString('base64')}`,
    );

    // The router and blue's replica are still running: their environments.
    const router = JSON.parse(readFileSync(path.join(ws.stateDir, 'router', 'router.json'), 'utf8')) as {
      pid: number;
    };
    const routerEnv = environOf(router.pid);
    expect(routerEnv).not.toMatch(/CUTOVER_SECRET/);
    const replicas = filesUnder(ws.stateDir).filter((f) => f.endsWith('slot.json'));
    expect(replicas.length).toBeGreaterThan(0);
    const records = replicas.map(
      (f) =>
        JSON.parse(readFileSync(f, 'utf8')) as { replicas: Array<{ pid: number; pump?: { pid: number } }> },
    );
    const pids = records.flatMap((record) => record.replicas.map((replica) => replica.pid));
    const replicaEnvs = pids.filter((pid) => existsSync(`/proc/${pid}`)).map(environOf);
    expect(replicaEnvs.length).toBeGreaterThan(0);
    for (const replicaEnv of replicaEnvs) {
      expect(replicaEnv).toContain(`DB_PASSWORD=${values.password}`); // it needs it
      expect(replicaEnv).not.toMatch(/CUTOVER_SECRET/);
    }
    // What writes a replica's log (its log pump) holds no secret where others can read it.
    const writers = records
      .flatMap((record) => record.replicas.map((replica) => replica.pump?.pid ?? 0))
      .filter((pid) => pid > 0 && existsSync(`/proc/${pid}`));
    expect(writers.length).toBeGreaterThan(0);
    for (const writer of writers) {
      const writerEnv = environOf(writer);
      expect(writerEnv).not.toMatch(/CUTOVER_SECRET/);
      for (const value of Object.values(values)) expect(writerEnv).not.toContain(value);
      expect(readFileSync(`/proc/${writer}/cmdline`, 'utf8')).not.toContain(values.password);
    }

    // The server on the state directory, with the secrets where it runs, asked as every role.
    const tokens = { viewer: distinct('tv-'), operator: distinct('to-') };
    const server = await harness.start({
      stateDir: ws.stateDir,
      workdir: ws.dir,
      env: { CUTOVER_TOKENS: `v:viewer:${tokens.viewer},o:operator:${tokens.operator}` },
    });
    const answers: string[] = [];
    for (const token of Object.values(tokens)) {
      const api = await Api.connect(server.url, token);
      const get = async (url: string) => {
        const got = await api.get(url);
        expect(got.status, got.text).toBe(200);
        answers.push(got.text);
        return got.text;
      };
      const list = JSON.parse(await get('/v1/migrations')) as { items: Array<{ id: string }> };
      for (const { id } of list.items) {
        await get(`/v1/migrations/${id}`);
        await get(`/v1/migrations/${id}/logs`);
      }
      await get('/v1/environments');
      await get('/v1/environments/leaks');
    }
    // The answers did have the notify URL to show: by its name.
    expect(answers.join('\n')).toContain('NOTIFY_URL');
    await server.stop();
    answers.push(server.stdout(), server.stderr());

    const files = filesUnder(ws.stateDir);
    expect(files.some((f) => f.endsWith('journal.ndjson'))).toBe(true);
    expect(files.some((f) => f.endsWith('log.ndjson'))).toBe(true);
    expect(files.some((f) => f.endsWith('notifications.ndjson'))).toBe(true);
    const replicaLogs = files.filter((f) => /replica-\d+\.log$/.test(f));
    expect(replicaLogs.length).toBeGreaterThan(0);
    for (const [what, value] of Object.entries(values)) {
      // Replicas' own logs included.
      expect(
        files.filter((f) => readFileSync(f).includes(value)),
        what,
      ).toEqual([]);
      expect(
        outputs.filter((o) => o.includes(value)),
        what,
      ).toEqual([]);
      expect(
        answers.filter((a) => a.includes(value)),
        what,
      ).toEqual([]);
      expect(
        notified.got.filter((r) => r.body.includes(value)),
        what,
      ).toEqual([]);
    }
    // A replica's own log has what it printed, its password masked, and is 0600.
    for (const log of replicaLogs) {
      expect(readFileSync(log, 'utf8'), log).toContain('connecting with password (sensitive)');
      expect(modeOf(log), log).toBe(0o600);
    }
  }, 120_000);
});
