/**
 * Notifications of real migrations (issue 21): a receiver in the test gets every event of a
 * migration, each signed with the secret; receivers that hang or are down never hold a migration
 * up beyond a bound, and their deliveries are given up in the log and the record.
 */
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachedGraceMs } from '../../engine/notify/notifier.js';
import { repoRoot, runBinary, runCli } from '../support/cli.js';
import { freePort, liveWorkspace, setFileVersion, type Workspace } from '../support/migrations.js';
import { exitedAndDrained, running } from '../support/processes.js';

const hookKey = 'test-signing-key-21';
const env = { CUTOVER_SECRET_HOOK_KEY: hookKey };

interface Received {
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** A local receiver: answers 200 to every POST and keeps what it got. */
async function receiver(): Promise<{ url: string; got: Received[]; close: () => Promise<void> }> {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString('utf8');
    });
    req.on('end', () => {
      got.push({ body, headers: req.headers });
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}/hook`, got, close: () => closeServer(server) };
}

/** A receiver that accepts connections and never answers. */
async function hangingReceiver(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer(() => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}/hook`, close: () => closeServer(server) };
}

function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

function withNotify(targets: string): (yaml: string) => string {
  return (yaml) => `${yaml}\nnotify:\n${targets}\n`;
}

async function migrate(w: Workspace): Promise<{ ms: number; id: string }> {
  const started = Date.now();
  // The binary: the migration reads the hooks' secrets from its process's environment.
  const result = await runBinary(['topology', 'migrate', '-f', w.file, '--yes', '--json'], { env });
  const ms = Date.now() - started;
  expect(result.code, result.stderr).toBe(0);
  const out = JSON.parse(result.stdout) as { summary?: { id: string; lifecycle: string }; id?: string };
  const summary = out.summary ?? (out as { id: string; lifecycle: string });
  expect(summary).toMatchObject({ lifecycle: 'completed' });
  return { ms, id: summary.id };
}

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

function records(w: Workspace, id: string): Array<Record<string, unknown>> {
  const file = path.join(w.stateDir, 'environments', 'live-demo', 'migrations', id, 'notifications.ndjson');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('notifications', () => {
  let w: Workspace;
  let hook: Awaited<ReturnType<typeof receiver>>;
  let hang: Awaited<ReturnType<typeof hangingReceiver>>;
  let downUrl: string;

  beforeAll(async () => {
    hook = await receiver();
    hang = await hangingReceiver();
    downUrl = `http://127.0.0.1:${await freePort()}/hook`;
    w = await liveWorkspace();
    await migrate(w); // the first layout, without targets
  }, 60_000);

  afterAll(async () => {
    await w?.cleanup();
    await hook?.close();
    await hang?.close();
  }, 60_000);

  it('a receiver gets every event of a migration, started … completed, each signed with the secret', async () => {
    setFileVersion(
      w,
      '1.0.0',
      '1.1.0',
      withNotify(`  ops:\n    type: webhook\n    url: ${hook.url}\n    signingSecret: { secret: HOOK_KEY }`),
    );
    const { id } = await migrate(w);
    // The last event is delivered beside the migration, maybe after the CLI saw it complete: wait for it.
    await until('the completed event', () =>
      hook.got.some((r) => r.body.includes('"dev.cutover.migration.completed"')) ? true : undefined,
    );
    const events = hook.got.map(
      (r) =>
        JSON.parse(r.body) as { type: string; id: string; subject: string; data: Record<string, unknown> },
    );
    expect(events.map((e) => [e.type.replace('dev.cutover.migration.', ''), e.data.weight ?? null])).toEqual([
      ['started', null],
      ['step_reached', 10],
      ['step_reached', 50],
      ['step_reached', 100],
      ['completed', null],
    ]);
    expect(events.every((e) => e.subject === id)).toBe(true);
    expect(events.at(-1)?.data).toMatchObject({
      environment: 'live-demo',
      versions: { web: { from: '1.0.0', to: '1.1.0' } },
    });
    for (const r of hook.got) {
      const timestamp = String(r.headers['x-cutover-timestamp']);
      const expected = `sha256=${createHmac('sha256', hookKey).update(`${timestamp}.${r.body}`).digest('hex')}`;
      expect(r.headers['x-cutover-signature']).toBe(expected);
      expect(Math.abs(Date.now() / 1000 - Number(timestamp))).toBeLessThan(300);
      expect(r.headers['content-type']).toBe('application/cloudevents+json');
    }
    // Every delivery is in the record and in the migration's log.
    await until('5 records', () => (records(w, id).length === 5 ? true : undefined));
    expect(records(w, id).map((r) => r.outcome)).toEqual(Array(5).fill('delivered'));
    const logs = await runCli(['topology', 'migration', 'logs', id, '-f', w.file], { env });
    expect(logs.stdout).toMatch(
      /notify ops \(webhook http:\/\/127\.0\.0\.1:\d+\/hook\): delivered migration\.completed in \d+ ms \(200\)/,
    );
  }, 60_000);

  it('receivers that hang or are down: the migration completes within the bound of one without them, and their deliveries are given up, visibly', async () => {
    setFileVersion(w, '1.1.0', '1.2.0', (y) => y.replace(/\nnotify:\n[\s\S]*$/, '\n'));
    const without = await migrate(w);
    setFileVersion(
      w,
      '1.2.0',
      '1.3.0',
      withNotify(
        [
          `  slow:\n    type: webhook\n    url: ${hang.url}\n    signingSecret: { secret: HOOK_KEY }\n    timeout: 1s\n    retries: 1`,
          `  gone:\n    type: slack\n    url: ${downUrl}\n    retries: 2`,
        ].join('\n'),
      ),
    );
    const withDead = await migrate(w);
    // The bound: a migration with dead receivers takes no more than one without them, plus slack
    // for a loaded machine; a delivery in its path would add at least 1 s per event here.
    expect(withDead.ms).toBeLessThan(without.ms * 1.5 + 2_000);
    // Nothing is lost silently: each of its 5 events has a result for each target, once the
    // process driving it has exited (a target's queue left then is recorded as abandoned).
    const all = await until('a result per event and target', () => {
      const got = records(w, withDead.id);
      return got.length === 10 ? got : undefined;
    });
    const find = (target: string, event: string) =>
      all.find((r) => r.target === target && r.type === `dev.cutover.migration.${event}`);
    expect(find('gone', 'started')).toMatchObject({ outcome: 'gave_up', attempts: 3 });
    expect(String(find('gone', 'started')?.error)).toMatch(/ECONNREFUSED/);
    expect(find('slow', 'started')).toMatchObject({ error: 'no answer within 1000 ms' });
    expect(all.every((r) => r.outcome === 'gave_up' || r.outcome === 'abandoned')).toBe(true);
    const logs = await runCli(['topology', 'migration', 'logs', withDead.id, '-f', w.file], { env });
    expect(logs.stdout).toMatch(
      /notify gone \(slack http:\/\/127\.0\.0\.1:\d+\/…\): gave up on migration\.started after 3 attempts: ECONNREFUSED/,
    );
  }, 90_000);

  it('a receiver and a command that hang longer than the grace: a foreground migrate exits within it, and the command is killed', async () => {
    const pidFile = path.join(w.dir, 'notify-command.pid');
    const script = path.join(w.dir, 'hang.sh');
    // A command target that never exits (its own sleep, in its process group).
    writeFileSync(script, `#!/bin/sh\necho $$ > ${pidFile}\nexec sleep 120\n`);
    chmodSync(script, 0o755);
    setFileVersion(w, '1.3.0', '1.4.0', (y) =>
      withNotify(
        [
          `  slow:\n    type: webhook\n    url: ${hang.url}\n    signingSecret: { secret: HOOK_KEY }\n    timeout: 25s\n    retries: 0`,
          `  page:\n    type: command\n    command: [${script}]\n    timeout: 25s\n    retries: 0`,
        ].join('\n'),
      )(y.replace(/\nnotify:\n[\s\S]*$/, '\n')),
    );
    const child = spawn(
      process.execPath,
      [path.join(repoRoot, 'bin', 'cutover.js'), 'topology', 'migrate', '-f', w.file, '--yes', '--json'],
      { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString('utf8');
    });
    let exitAt = 0;
    child.once('exit', () => {
      exitAt = Date.now();
    });
    const exited = await exitedAndDrained(child)
      .then(({ code }) => ({ code, at: exitAt }))
      .finally(() => child.kill('SIGKILL'));
    expect(exited.code, stdout).toBe(0);
    const { summary } = JSON.parse(stdout) as { summary: { id: string; endedAt: string } };
    const { id } = summary;
    const ended = Date.parse(summary.endedAt);
    expect(ended).toBeGreaterThan(0);
    // The bound a foreground migrate promises (1 s after the migration ended), with slack for a
    // loaded machine; far below the targets' 25 s timeout that kept the process up before.
    expect(exited.at - ended).toBeLessThan(attachedGraceMs + 6_000);
    // The hanging command's process group was killed, not left behind.
    const pid = Number(readFileSync(pidFile, 'utf8').trim());
    await until(
      'the notify command to be gone',
      () => {
        try {
          process.kill(pid, 0);
          return undefined;
        } catch {
          return true;
        }
      },
      10_000,
    );
    const results = records(w, id).filter((r) => r.type === 'dev.cutover.migration.started');
    expect(results.map((r) => [r.target, r.outcome]).sort()).toEqual([
      ['page', 'abandoned'],
      ['slow', 'abandoned'],
    ]);
  }, 90_000);

  it('a background runner stopped by SIGTERM kills a notify command still running, rather than leave it behind', async () => {
    const pidFile = path.join(w.dir, 'notify-command-2.pid');
    const script = path.join(w.dir, 'hang2.sh');
    writeFileSync(script, `#!/bin/sh\necho $$ > ${pidFile}\nexec sleep 120\n`);
    chmodSync(script, 0o755);
    // commit: manual keeps the migration (and its runner) up once its traffic has moved.
    setFileVersion(w, '1.4.0', '1.5.0', (y) =>
      withNotify(`  page:\n    type: command\n    command: [${script}]\n    timeout: 25s\n    retries: 0`)(
        `${y.replace(/\nnotify:\n[\s\S]*$/, '\n')}\nstrategy:\n  commit: manual\n`,
      ),
    );
    const started = await runCli(['topology', 'migrate', '-f', w.file, '--yes', '--json', '--detach'], {
      env,
    });
    expect(started.code, started.stderr).toBe(0);
    const { summary } = JSON.parse(started.stdout) as { summary: { id: string; runnerPid: number } };
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const commandPid = await until('the notify command to start', () =>
      existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== ''
        ? Number(readFileSync(pidFile, 'utf8').trim())
        : undefined,
    );
    try {
      process.kill(summary.runnerPid, 'SIGTERM');
      await until('the runner to exit', () => (alive(summary.runnerPid) ? undefined : true), 15_000);
      // Its process group is killed with the runner, well before the target's 25 s timeout.
      // Gone: not running (a zombie not yet reaped by whoever inherited it counts as gone).
      await until('the notify command to be gone', () => (running(commandPid) ? undefined : true), 10_000);
    } finally {
      if (alive(commandPid)) process.kill(-commandPid, 'SIGKILL'); // the test's own leftover, if it failed
    }
    expect(records(w, summary.id).find((r) => r.target === 'page')).toMatchObject({ outcome: 'abandoned' });
  }, 90_000);
});
