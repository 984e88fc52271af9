/**
 * A migration with several notify targets publishes many events, each delivered beside the others:
 * no delivery may leave a listener on the notifier's shared abandon signal once it has ended (11 of
 * them made Node print MaxListenersExceededWarning in the middle of a `migrate`). Real deliveries
 * to a loopback receiver.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { CloudEvent } from '../../../core/notify/types.js';
import type { NotifyTarget } from '../../../core/topology/types.js';
import { Notifier } from '../../../engine/notify/notifier.js';
import { secretSource } from '../../../engine/secrets/secret-source.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'cutover-notify-listeners-'));
const receiver = createServer((request, response) => {
  request.resume();
  request.on('end', () => response.end('ok'));
});
afterAll(async () => {
  await new Promise((resolve) => receiver.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

function event(seq: number): CloudEvent {
  return {
    specversion: '1.0',
    id: `mig_01jabcdefghjkmnpqrstvwxyz0.${seq}.0`,
    source: 'cutover/shop',
    type: 'dev.cutover.migration.step_reached',
    subject: 'mig_01jabcdefghjkmnpqrstvwxyz0',
    time: new Date().toISOString(),
    datacontenttype: 'application/json',
    data: {
      environment: 'shop',
      migration: 'mig_01jabcdefghjkmnpqrstvwxyz0',
      event: 'step_reached',
      severity: 'info',
      message: `step ${seq}`,
      planId: 'plan_x',
      baseSerial: 1,
      versions: {},
    },
  };
}

it('three targets and twenty events leave no listener behind, and Node warns of none', async () => {
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const { port } = receiver.address() as AddressInfo;
  const target: NotifyTarget = {
    type: 'webhook',
    url: `http://127.0.0.1:${port}/hook`,
    signingSecret: { secret: 'KEY' },
    retries: 1,
    severity: 'info',
    timeout: 5_000,
  };
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  process.on('warning', onWarning);
  try {
    const lines: string[] = [];
    const notifier = new Notifier({
      targets: { a: target, b: target, c: target },
      secrets: secretSource({ CUTOVER_SECRET_KEY: 'k' }, dir),
      baseDir: dir,
      recordFile: path.join(dir, 'notifications.ndjson'),
      log: (_level, message) => lines.push(message),
    });
    for (let seq = 1; seq <= 20; seq += 1) notifier.publish(event(seq));
    await notifier.settle(20_000);
    expect(lines.filter((line) => /: delivered /.test(line))).toHaveLength(60);
    // Node emits the warning on the next tick after the listener that crossed the bound.
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  } finally {
    process.off('warning', onWarning);
  }
}, 30_000);
