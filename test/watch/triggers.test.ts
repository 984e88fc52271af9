/**
 * Webhook triggers (`<state>/watch/hooks/*.json`, dropped by `cutover server`) for a watcher's
 * repository are removed once it has consumed them, in every mode: a remote watched on an interval,
 * a local repository (whose refs are watched, so the trigger only asks for a look), and `--once` on
 * either. Before, a local or `--once` watcher left them to pile up for ever. A trigger that names
 * no repository is for every watcher: each acts on it, and none removes it (the grace period does).
 */
import { existsSync, mkdirSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { bareRemote, cleanUp, initRepo, scratch, startWatch, trackStateDir } from '../support/git.js';

afterEach(cleanUp);

let serial = 0;

/**
 * Drops a trigger as the server does (written aside as a dot file, renamed in), naming the
 * repository pushed to by its clone URL, or naming none.
 */
function dropTrigger(stateDir: string, cloneUrl: string | null): string {
  const dir = path.join(stateDir, 'watch', 'hooks');
  mkdirSync(dir, { recursive: true });
  const name = `${Date.now()}-test${serial++}.json`;
  writeFileSync(
    path.join(dir, `.${name}`),
    JSON.stringify({
      receivedAt: Date.now(),
      ref: 'refs/heads/main',
      ...(cloneUrl === null ? {} : { repository: { clone_url: cloneUrl, full_name: 'acme/app' } }),
    }),
  );
  renameSync(path.join(dir, `.${name}`), path.join(dir, name));
  return path.join(dir, name);
}

/** Waits (bounded) until the file is gone. */
async function waitGone(file: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`${path.basename(file)} is still there after ${timeoutMs} ms`);
    await sleep(10);
  }
}

async function setup(remote: boolean) {
  const repo = await initRepo('examples/exec-demo');
  const root = await scratch();
  const source = remote ? (await bareRemote(repo)).url : repo.dir;
  const out = path.join(root, 'out');
  const stateDir = trackStateDir(path.join(root, 'state'));
  const head = (await repo.head()).slice(0, 7);
  // How a push names it: a remote by its URL; a local repository pushed to directly by its path.
  const cloneUrl = remote ? source : pathToFileURL(repo.dir).href;
  return { repo, source, out, stateDir, head, cloneUrl };
}

describe('webhook triggers are removed once consumed', () => {
  for (const mode of ['local', 'remote'] as const) {
    it(`${mode} repository, watching`, async () => {
      const { source, out, stateDir, head, cloneUrl } = await setup(mode === 'remote');
      const watch = startWatch({ repo: source, out, stateDir, extra: ['--interval', '60s'] });
      await watch.line(new RegExp(`^\\S+ ${head} topology\\.yaml \\(exec-demo\\): Plan: 2 to add`));
      const trigger = dropTrigger(stateDir, cloneUrl);
      await waitGone(trigger);
      await watch.line(/webhook \(refs\/heads\/main\): (fetching|looking) now/);
      expect(readdirSync(path.dirname(trigger))).toEqual([]);
      expect(watch.matching(/fetch failed|check failed/)).toEqual([]);
    });

    it(`${mode} repository, --once`, async () => {
      const { source, out, stateDir, head, cloneUrl } = await setup(mode === 'remote');
      const trigger = dropTrigger(stateDir, cloneUrl);
      const once = await runCli(['watch', '--repo', source, '--out', out, '--state-dir', stateDir, '--once']);
      expect(once.code, once.stderr).toBe(0);
      expect(once.stdout).toMatch(new RegExp(`${head} topology\\.yaml \\(exec-demo\\): Plan: 2 to add`));
      expect(existsSync(trigger)).toBe(false);
    });
  }

  it('a trigger naming no repository: the watcher acts on it and leaves it to the others', async () => {
    const { source, out, stateDir, head } = await setup(true);
    const watch = startWatch({ repo: source, out, stateDir, extra: ['--interval', '60s'] });
    await watch.line(new RegExp(`^\\S+ ${head} topology\\.yaml \\(exec-demo\\): Plan: 2 to add`));
    const trigger = dropTrigger(stateDir, null);
    await watch.line(/webhook \(refs\/heads\/main\): fetching now/);
    expect(existsSync(trigger)).toBe(true);
  });
});
