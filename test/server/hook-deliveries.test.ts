/**
 * The record of webhook deliveries taken (server/hook-deliveries.ts), on real files: a delivery is
 * refused again for the window and taken again after it; a delivery known by any one of its keys
 * is a replay and records nothing new; a forgotten one (not acted on) is taken on retry; two logs
 * on one directory (two servers, or a restart) share what they took.
 */
import { readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { DeliveryLog, hookReplayWindowMs } from '../../server/hook-deliveries.js';
import { tempDir } from '../support/cli.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function dir(): Promise<string> {
  const made = await tempDir('cutover-deliveries-');
  cleanups.push(made.cleanup);
  return path.join(made.dir, 'hook-deliveries');
}

const body = (n: number) => ({ what: 'this signed body', value: `body:${n}` });
const id = (n: number) => ({ what: `delivery ${n}`, value: `id:${n}` });
const t0 = 1_800_000_000_000;

it('refuses a delivery within the window, by any of its keys, and takes it again after', async () => {
  const d = await dir();
  const log = new DeliveryLog(d);
  expect(log.record([id(1), body(1)], t0)).toBeNull();
  expect(log.record([id(1), body(1)], t0 + 1000)).toEqual({ what: 'delivery 1', at: t0 });
  // Same body under another id: a replay, and the new id is not recorded by it.
  expect(log.record([id(2), body(1)], t0 + 2000)).toEqual({ what: 'this signed body', at: t0 });
  expect(log.record([id(2), body(2)], t0 + 3000)).toBeNull();
  // Another log on the same directory (another server, or this one restarted) knows them.
  expect(new DeliveryLog(d).record([body(2)], t0 + 4000)).toEqual({
    what: 'this signed body',
    at: t0 + 3000,
  });
  // After the window, a delivery is new again; and what is older than the window is removed.
  expect(readdirSync(d)).toHaveLength(4);
  expect(log.record([id(1), body(1)], t0 + hookReplayWindowMs + 5000)).toBeNull();
  expect(readdirSync(d)).toHaveLength(2);
});

it('forgets a delivery that was not acted on, and takes a record torn by a crash as not taken', async () => {
  const d = await dir();
  const log = new DeliveryLog(d);
  expect(log.record([id(3), body(3)], t0)).toBeNull();
  log.forget([id(3), body(3)]);
  expect(log.record([id(3), body(3)], t0 + 1)).toBeNull();
  // A file created but never written (a crash in between): the retry is taken.
  expect(log.record([body(4)], t0)).toBeNull();
  for (const name of readdirSync(d)) writeFileSync(path.join(d, name), '');
  expect(log.record([body(4)], t0 + 5)).toBeNull();
  expect(log.record([body(4)], t0 + 6)).toEqual({ what: 'this signed body', at: t0 + 5 });
});
