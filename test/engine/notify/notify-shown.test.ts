/**
 * Where a delivery went, as the migration's log and notifications.ndjson name it (and the plan
 * shows it): never a credential a plain-string URL carries. User info and the query are left out,
 * as for hooks; a Slack URL's path is its token, so only its host shows. Real deliveries to a
 * closed loopback port (refused at once), a real record file.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { CloudEvent } from '../../../core/notify/types.js';
import { planNotifyTargets } from '../../../core/plan/plan-notify.js';
import type { NotifyTarget } from '../../../core/topology/types.js';
import { Notifier } from '../../../engine/notify/notifier.js';
import { secretSource } from '../../../engine/secrets/secret-source.js';
import { freePort } from '../../support/migrations.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'cutover-notify-shown-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const secrets = ['hunter2', 'token=abc', 'T0001/B0002/XyZsecret'];

function event(): CloudEvent {
  return {
    specversion: '1.0',
    id: 'mig_01jabcdefghjkmnpqrstvwxyz0.1.0',
    source: 'cutover/shop',
    type: 'dev.cutover.migration.started',
    subject: 'mig_01jabcdefghjkmnpqrstvwxyz0',
    time: new Date().toISOString(),
    datacontenttype: 'application/json',
    data: {
      environment: 'shop',
      migration: 'mig_01jabcdefghjkmnpqrstvwxyz0',
      event: 'started',
      severity: 'info',
      message: 'started',
      planId: 'plan_x',
      baseSerial: 1,
      versions: {},
    },
  };
}

it('names a webhook without its user info or query, and a Slack URL by its host only', async () => {
  const port = await freePort(); // nothing listens: each attempt is refused
  const base = { retries: 0, severity: 'info', timeout: 2_000 } as const;
  const targets: Record<string, NotifyTarget> = {
    ops: {
      ...base,
      type: 'webhook',
      url: `http://ci:hunter2@127.0.0.1:${port}/hook?token=abc`,
      signingSecret: { secret: 'KEY' },
    },
    chat: { ...base, type: 'slack', url: `http://127.0.0.1:${port}/services/T0001/B0002/XyZsecret` },
  };
  const lines: string[] = [];
  const recordFile = path.join(dir, 'notifications.ndjson');
  const notifier = new Notifier({
    targets,
    secrets: secretSource({ CUTOVER_SECRET_KEY: 'k' }, dir),
    baseDir: dir,
    recordFile,
    log: (_level, message) => lines.push(message),
  });
  notifier.publish(event());
  await notifier.settle(10_000);
  const record = readFileSync(recordFile, 'utf8');
  const all = `${lines.join('\n')}\n${record}`;
  for (const secret of secrets) expect(all).not.toContain(secret);
  expect(lines).toHaveLength(2);
  expect(lines.find((l) => l.startsWith('notify ops'))).toMatch(
    new RegExp(
      `^notify ops \\(webhook http://127\\.0\\.0\\.1:${port}/hook\\?…\\): gave up on migration\\.started`,
    ),
  );
  expect(lines.find((l) => l.startsWith('notify chat'))).toMatch(
    new RegExp(`^notify chat \\(slack http://127\\.0\\.0\\.1:${port}/…\\): gave up`),
  );
  const tos = record
    .trim()
    .split('\n')
    .map((l) => (JSON.parse(l) as { to: string }).to)
    .sort();
  expect(tos).toEqual([`http://127.0.0.1:${port}/hook?…`, `http://127.0.0.1:${port}/…`].sort());

  // The plan shows the targets the same way.
  const shown = JSON.stringify(planNotifyTargets(targets));
  for (const secret of secrets) expect(shown).not.toContain(secret);
});
