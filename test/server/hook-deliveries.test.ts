/**
 * The record of webhook deliveries taken (server/hook-deliveries.ts), on real files: a delivery is
 * known for the window and taken again after it; a forgotten one (not acted on) is taken on retry;
 * two logs on one directory (two servers, or a restart) share what they took. A record is written
 * whole before it is seen (a reader never meets half of one), carries its time as its mtime, and
 * records older than the window are pruned by that time, after the request that found them due.
 */
import { linkSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
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

const body = (n: number) => `sha256=${String(n).padStart(64, '0')}`;
const t0 = 1_800_000_000_000;

it('knows a delivery for the window, on every log of the directory, and takes it again after', async () => {
  const d = await dir();
  const log = new DeliveryLog(d);
  expect(log.record(body(1), t0)).toBeNull();
  expect(log.record(body(1), t0 + 1000)).toBe(t0);
  expect(log.record(body(2), t0 + 3000)).toBeNull();
  // Another log on the same directory (another server, or this one restarted) knows them.
  expect(new DeliveryLog(d).record(body(2), t0 + 4000)).toBe(t0 + 3000);
  // After the window, a delivery is new again; and what is older than the window is removed.
  expect(readdirSync(d)).toHaveLength(2);
  expect(log.record(body(1), t0 + hookReplayWindowMs + 5000)).toBeNull();
  await log.settled();
  expect(readdirSync(d)).toHaveLength(1);
});

it('forgets a delivery that was not acted on, and takes a record torn by a crash as not taken', async () => {
  const d = await dir();
  const log = new DeliveryLog(d);
  expect(log.record(body(3), t0)).toBeNull();
  log.forget(body(3));
  expect(log.record(body(3), t0 + 1)).toBeNull();
  // A record whose content a crash lost: the retry is taken.
  expect(log.record(body(4), t0)).toBeNull();
  for (const name of readdirSync(d)) writeFileSync(path.join(d, name), '');
  expect(log.record(body(4), t0 + 5)).toBeNull();
  expect(log.record(body(4), t0 + 6)).toBe(t0 + 5);
});

it('replaces an expired record whole (a new file renamed in), never rewriting it in place', async () => {
  const d = await dir();
  const log = new DeliveryLog(d);
  expect(log.record(body(5), t0)).toBeNull();
  const [name] = readdirSync(d);
  const record = path.join(d, name as string);
  // What another server reading the record at that moment has open: the old file.
  const opened = path.join(path.dirname(d), 'opened');
  linkSync(record, opened);
  // A prune shortly before it expires keeps it; it expires before the next prune is due.
  expect(log.record(body(6), t0 + hookReplayWindowMs - 60_000)).toBeNull();
  await log.settled();
  const later = t0 + hookReplayWindowMs + 1;
  expect(log.record(body(5), later)).toBeNull();
  expect(readFileSync(opened, 'utf8')).toBe(String(t0));
  expect(readFileSync(record, 'utf8')).toBe(String(later));
});

it('a record carries its time as its mtime, and pruning goes by it', async () => {
  const d = await dir();
  const log = new DeliveryLog(d);
  expect(log.record(body(6), t0)).toBeNull();
  const [name] = readdirSync(d);
  expect(Math.round(statSync(path.join(d, name as string)).mtimeMs)).toBe(t0);
  expect(log.record(body(7), t0 + hookReplayWindowMs / 2)).toBeNull();
  // Due again after the window: body 6's record goes, body 7's stays.
  expect(log.record(body(8), t0 + hookReplayWindowMs + 1)).toBeNull();
  await log.settled();
  expect(readdirSync(d)).toHaveLength(2);
  expect(log.record(body(7), t0 + hookReplayWindowMs + 2)).toBe(t0 + hookReplayWindowMs / 2);
});
