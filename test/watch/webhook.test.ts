/**
 * The Git webhook, end to end: a real `cutover server` and a remote-mode `cutover watch` on one
 * state directory, the watcher's interval a minute long. A signed push makes the watcher fetch at
 * once; a missing or wrong signature is refused; a server without a secret refuses every hook.
 */
import { createHmac } from 'node:crypto';
import { readdirSync } from 'node:fs';
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
  scratch,
  startServer,
  startWatch,
  trackStateDir,
  waitForFile,
} from '../support/git.js';

afterEach(cleanUp);

const secret = 'hook-secret-for-tests';

function sign(body: string, key = secret): string {
  return `sha256=${createHmac('sha256', key).update(body).digest('hex')}`;
}

async function hook(
  url: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; type: string; json: Record<string, unknown> }> {
  const response = await fetch(`${url}/v1/hooks/git`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return {
    status: response.status,
    type: response.headers.get('content-type') ?? '',
    json: (await response.json()) as Record<string, unknown>,
  };
}

describe('POST /v1/hooks/git', () => {
  it('refuses bad signatures, answers a ping, and makes the watcher fetch a signed push at once', async () => {
    const repo = await initRepo('examples/exec-demo');
    const { url: remote } = await bareRemote(repo);
    const root = path.dirname(repo.dir);
    const out = path.join(root, 'out');
    const stateDir = trackStateDir(path.join(root, 'state'));
    const [server, watch] = await Promise.all([
      startServer(stateDir, { CUTOVER_HOOK_SECRET: secret }),
      (async () => {
        const w = startWatch({ repo: remote, out, stateDir, extra: ['--interval', '60s'] });
        const initial = (await repo.head()).slice(0, 7);
        await w.line(new RegExp(`^\\S+ ${initial} topology\\.yaml \\(exec-demo\\): Plan: 2 to add`));
        return w;
      })(),
    ]);
    const hooksDir = path.join(stateDir, 'watch', 'hooks');

    repo.setVersion('db', '2');
    const commit = await repo.commit('db 2');
    await repo.git('push', '-q', 'origin', 'main');
    const push = JSON.stringify({
      ref: 'refs/heads/main',
      after: commit.sha,
      repository: { clone_url: remote },
    });

    // A wrong signature, one made with another secret, and none at all: 401, a problem.
    const wrong: Record<string, string>[] = [
      { 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` },
      { 'x-hub-signature-256': sign(push, 'another-secret') },
      { 'x-hub-signature-256': sign(`${push} `) },
      { 'x-hub-signature-256': 'sha1=abc' },
      {},
    ];
    for (const headers of wrong) {
      const refused = await hook(server.url, push, { ...headers, 'x-github-event': 'push' });
      expect(refused.status, JSON.stringify(headers)).toBe(401);
      expect(refused.type).toMatch(/^application\/problem\+json/);
      expect(refused.json.code).toBe('UNAUTHORIZED');
    }
    // A signed ping: 200, and no fetch.
    const ping = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 });
    const pong = await hook(server.url, ping, {
      'x-hub-signature-256': sign(ping),
      'x-github-event': 'ping',
    });
    expect(pong.status).toBe(200);
    expect(pong.json).toEqual({ pong: true });
    expect(readdirSync(hooksDir).filter((f) => !f.startsWith('.'))).toEqual([]);
    expect(watch.matching(/webhook/)).toEqual([]);
    expect(existsReport(out, commit.short)).toBe(false);

    // A signed push: 202, and the watcher fetches and plans it at once, a minute before its interval.
    const accepted = await hook(server.url, push, {
      'x-hub-signature-256': sign(push),
      'x-github-event': 'push',
    });
    const answeredAt = performance.now();
    expect(accepted.status).toBe(202);
    expect(accepted.json).toEqual({ triggered: true });
    const report = reportPaths(out, 'exec-demo', commit.short);
    const seen = await waitForFile(report.json, 10_000);
    expect(seen - answeredAt, 'hook answered → report').toBeLessThan(1500);
    expect(plannedVersion(readJson<PlanJson>(report.json), 'db')).toBe('2');
    await watch.line(new RegExp(`webhook \\(refs/heads/main → ${commit.short}\\): fetching now`));

    // GitHub's default content type, the JSON in a form's `payload` field, signed as sent.
    repo.setVersion('db', '3');
    const next = await repo.commit('db 3');
    await repo.git('push', '-q', 'origin', 'main');
    const form = new URLSearchParams({
      payload: JSON.stringify({ ref: 'refs/heads/main', after: next.sha }),
    }).toString();
    const formAccepted = await hook(server.url, form, {
      'content-type': 'application/x-www-form-urlencoded',
      'x-hub-signature-256': sign(form),
      'x-github-event': 'push',
    });
    const formAnsweredAt = performance.now();
    expect(formAccepted.status).toBe(202);
    const formSeen = await waitForFile(reportPaths(out, 'exec-demo', next.short).json, 10_000);
    expect(formSeen - formAnsweredAt, 'form hook answered → report').toBeLessThan(1500);
    await watch.line(new RegExp(`webhook \\(refs/heads/main → ${next.short}\\): fetching now`));
    expect(watch.matching(/fetch failed|check failed/)).toEqual([]);
  });

  it('answers 503 HOOKS_NOT_CONFIGURED on a server without a secret', async () => {
    const stateDir = trackStateDir(path.join(await scratch(), 'state'));
    const server = await startServer(stateDir);
    const body = JSON.stringify({ ref: 'refs/heads/main' });
    const refused = await hook(server.url, body, { 'x-hub-signature-256': sign(body) });
    expect(refused.status).toBe(503);
    expect(refused.type).toMatch(/^application\/problem\+json/);
    expect(refused.json.code).toBe('HOOKS_NOT_CONFIGURED');
  });
});

function existsReport(out: string, short: string): boolean {
  try {
    return readdirSync(path.join(out, 'exec-demo')).includes(`${short}.plan.json`);
  } catch {
    return false;
  }
}
