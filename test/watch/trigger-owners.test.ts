/**
 * Webhook triggers belong to the repository pushed to: several watchers share one state
 * directory's `watch/hooks/`, and each takes only the triggers that name its own repository (the
 * server writes the push's clone, SSH and web URLs and full name). Before, a local watcher, or any
 * `--once` run, took every trigger, and a remote watcher on the same state directory lost its
 * push until its interval fetch. A trigger nobody takes is removed after a grace period.
 */
import { createHmac } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, expect, it } from 'vitest';
import { staleTriggerMs } from '../../watch/hook-triggers.js';
import { runCli } from '../support/cli.js';
import {
  bareRemote,
  cleanUp,
  initRepo,
  type PlanJson,
  plannedVersion,
  readJson,
  reportPaths,
  scratch,
  startServer,
  startWatch,
  trackStateDir,
  waitForFile,
} from '../support/git.js';

afterEach(cleanUp);

const secret = 'hook-secret-for-trigger-owners';

/** Waits (bounded) until the directory holds no complete trigger. */
async function waitEmpty(dir: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = readdirSync(dir).filter((f) => !f.startsWith('.'));
    if (left.length === 0) return;
    if (Date.now() > deadline) throw new Error(`${left.join(', ')} still in ${dir} after ${timeoutMs} ms`);
    await sleep(10);
  }
}

it('a push to a remote is fetched at once by its watcher; a local watcher and a local --once leave its trigger alone', async () => {
  const remoteRepo = await initRepo('examples/exec-demo');
  const { url } = await bareRemote(remoteRepo);
  const localRepo = await initRepo('examples/exec-demo');
  const root = await scratch();
  const stateDir = trackStateDir(path.join(root, 'state'));
  const hooks = path.join(stateDir, 'watch', 'hooks');
  const server = await startServer(stateDir, { CUTOVER_HOOK_SECRET: secret });
  // Both on the same state directory; the remote's interval a minute long.
  const remote = startWatch({
    repo: url,
    out: path.join(root, 'out-remote'),
    stateDir,
    extra: ['--interval', '60s'],
  });
  const local = startWatch({
    repo: localRepo.dir,
    out: path.join(root, 'out-local'),
    stateDir,
    extra: ['--interval', '60s'],
  });
  const firstRemote = (await remoteRepo.head()).slice(0, 7);
  await remote.line(new RegExp(`^\\S+ ${firstRemote} topology\\.yaml \\(exec-demo\\): Plan: 2 to add`));
  const firstLocal = (await localRepo.head()).slice(0, 7);
  await local.line(new RegExp(`^\\S+ ${firstLocal} topology\\.yaml \\(exec-demo\\): Plan: 2 to add`));

  remoteRepo.setVersion('db', '2');
  const commit = await remoteRepo.commit('db 2');
  await remoteRepo.git('push', '-q', 'origin', 'main');
  // The remote watcher is held (SIGSTOP) while the push's trigger lands and a local --once runs:
  // whatever takes the trigger meanwhile takes it from the remote watcher.
  process.kill(remote.pid, 'SIGSTOP');
  try {
    const push = JSON.stringify({
      ref: 'refs/heads/main',
      after: commit.sha,
      repository: {
        full_name: 'acme/remote',
        clone_url: url,
        ssh_url: 'git@git.example:acme/remote.git',
        html_url: 'https://git.example/acme/remote',
        pushed_at: Math.floor(Date.now() / 1000),
      },
    });
    const response = await fetch(`${server.url}/v1/hooks/git`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(push).digest('hex')}`,
      },
      body: push,
    });
    expect(response.status).toBe(202);
    const once = await runCli([
      'watch',
      '--repo',
      localRepo.dir,
      '--out',
      path.join(root, 'out-once'),
      '--state-dir',
      stateDir,
      '--once',
    ]);
    expect(once.code, once.stderr).toBe(0);
  } finally {
    process.kill(remote.pid, 'SIGCONT');
  }
  // The remote watcher fetches at once (its interval is a minute), and takes the trigger.
  await waitForFile(reportPaths(path.join(root, 'out-remote'), 'exec-demo', commit.short).json, 10_000);
  await remote.line(new RegExp(`webhook \\(refs/heads/main → ${commit.short}\\): fetching now`));
  expect(
    plannedVersion(
      readJson<PlanJson>(reportPaths(path.join(root, 'out-remote'), 'exec-demo', commit.short).json),
      'db',
    ),
  ).toBe('2');
  await waitEmpty(hooks);
  // The local watcher was never asked to look.
  expect(local.matching(/webhook/)).toEqual([]);
});

it('a trigger nobody takes is removed after the grace period, not before', async () => {
  const localRepo = await initRepo('examples/exec-demo');
  const root = await scratch();
  const stateDir = trackStateDir(path.join(root, 'state'));
  const hooks = path.join(stateDir, 'watch', 'hooks');
  mkdirSync(hooks, { recursive: true });
  const forOther = (name: string) => {
    const file = path.join(hooks, name);
    writeFileSync(
      file,
      JSON.stringify({
        receivedAt: Date.now(),
        ref: 'refs/heads/main',
        repository: { clone_url: 'file:///elsewhere.git' },
      }),
    );
    return file;
  };
  const fresh = forOther('2-fresh.json');
  const stale = forOther('1-stale.json');
  const old = (Date.now() - staleTriggerMs - 60_000) / 1000;
  utimesSync(stale, old, old);
  const once = await runCli([
    'watch',
    '--repo',
    localRepo.dir,
    '--out',
    path.join(root, 'out'),
    '--state-dir',
    stateDir,
    '--once',
  ]);
  expect(once.code, once.stderr).toBe(0);
  expect(existsSync(stale)).toBe(false);
  expect(existsSync(fresh)).toBe(true);
});
