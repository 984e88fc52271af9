/**
 * `cutover watch` on a remote (`file://` to a bare repository on disk), fetched into a cache clone
 * every `--interval`: pushes are planned within an interval and a second; force-pushes and a
 * deleted branch are logged and survived.
 */
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bareRemote,
  cleanUp,
  initRepo,
  type PlanJson,
  plannedVersion,
  readJson,
  reportPaths,
  startWatch,
  trackStateDir,
  waitForFile,
} from '../support/git.js';

afterEach(cleanUp);

async function setup(extra: string[] = []) {
  const repo = await initRepo('examples/exec-demo');
  const { url } = await bareRemote(repo);
  const root = path.dirname(repo.dir);
  const out = path.join(root, 'out');
  const stateDir = trackStateDir(path.join(root, 'state'));
  const watch = startWatch({ repo: url, out, stateDir, extra: ['--interval', '1s', ...extra] });
  const initial = (await repo.head()).slice(0, 7);
  await watch.line(new RegExp(`^\\S+ watching ${url} branch main for topology\\.yaml \\(fetch every 1 s\\)`));
  await watch.line(new RegExp(`^\\S+ ${initial} topology\\.yaml \\(exec-demo\\): Plan: 2 to add`));
  /** Commits a new db version and pushes it; when the push returned. */
  const push = async (version: string, pushArgs: string[] = []) => {
    repo.setVersion('db', version);
    const commit = await repo.commit(`db ${version}`);
    await repo.git('push', '-q', ...pushArgs, 'origin', 'HEAD:main');
    return { ...commit, at: performance.now() };
  };
  return { repo, out, stateDir, watch, initial, push };
}

describe('cutover watch, remote repository', () => {
  it('plans a push within the interval and a second', async () => {
    const { out, watch, push } = await setup();
    for (const version of ['2', '3']) {
      const pushed = await push(version);
      const report = reportPaths(out, 'exec-demo', pushed.short);
      const seen = await waitForFile(report.json, 10_000);
      expect(seen - pushed.at, `push → report of ${version}`).toBeLessThan(2000);
      expect(plannedVersion(readJson<PlanJson>(report.json), 'db')).toBe(version);
      await watch.line(new RegExp(`^\\S+ ${pushed.short} topology\\.yaml \\(exec-demo\\): Plan: 2 to add`));
    }
    expect(watch.matching(/fetch failed|check failed/)).toEqual([]);
  });

  it('logs a force-push that is not a fast-forward and plans the new head', async () => {
    const { repo, out, watch, push } = await setup();
    const a = await push('2');
    await waitForFile(reportPaths(out, 'exec-demo', a.short).json, 10_000);
    // Rewrite: drop A, commit B on its parent, force-push.
    await repo.git('reset', '-q', '--hard', 'HEAD~1');
    const b = await push('3', ['--force']);
    await watch.line(
      new RegExp(
        `main moved from ${a.short} to ${b.short}, not a fast-forward \\(a force-push\\?\\); planning the new head`,
      ),
      { timeoutMs: 10_000 },
    );
    const seen = await waitForFile(reportPaths(out, 'exec-demo', b.short).json, 10_000);
    expect(seen - b.at).toBeLessThan(2000);
    expect(plannedVersion(readJson<PlanJson>(reportPaths(out, 'exec-demo', b.short).json), 'db')).toBe('3');
  });

  it('keeps fetching when the branch is deleted, and plans again when it is pushed back', async () => {
    // --verbose: each fetch's look at the missing branch says so.
    const { repo, out, watch, push } = await setup(['--verbose']);
    await repo.git('push', '-q', 'origin', '--delete', 'main');
    const gone = await watch.line(/branch main does not exist any more \(deleted\?\); waiting for it/, {
      timeoutMs: 10_000,
    });
    // Two more fetches go by without a word more (but for --verbose's), and without a crash.
    const again = await watch.line(/^\S+ debug: branch main still does not exist$/, {
      from: gone.index + 1,
      timeoutMs: 10_000,
    });
    await watch.line(/^\S+ debug: branch main still does not exist$/, {
      from: again.index + 1,
      timeoutMs: 10_000,
    });
    expect(watch.alive()).toBe(true);
    expect(watch.matching(/^\S+ branch main does not exist/)).toHaveLength(1);
    expect(watch.matching(/fetch failed|check failed/)).toEqual([]);

    const c = await push('4');
    await watch.line(new RegExp(`branch main is back at ${c.short}`), { timeoutMs: 10_000 });
    const seen = await waitForFile(reportPaths(out, 'exec-demo', c.short).json, 10_000);
    expect(seen - c.at).toBeLessThan(2000);
    expect(plannedVersion(readJson<PlanJson>(reportPaths(out, 'exec-demo', c.short).json), 'db')).toBe('4');
  });
});
