/**
 * A hook call's stable id: hooks run at least once (a resumed migration, or a lost worker's command
 * run again, calls the hook again), so the receiver dedupes on `id` = `<migration id>.<command id>`,
 * the same on every run of that call. A real HTTP receiver on 127.0.0.1 and a real command hook.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { start } from '../../../core/migration/step.js';
import type { Command } from '../../../core/migration/types.js';
import { runHookCommand } from '../../../engine/hooks/hook-command.js';
import { secretSource } from '../../../engine/secrets/secret-source.js';
import { holdSpec } from '../../support/migration-builders.js';

let dir: string;
let server: Server;
let url: string;
const bodies: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'cutover-hook-id-'));
  server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      bodies.push(body);
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

const options = () => ({
  signal: new AbortController().signal,
  log: () => undefined,
  secrets: secretSource({}, dir),
});

describe('a hook call id', () => {
  it('is the same in the payload of every run of one call, and differs between calls', async () => {
    const spec = holdSpec([10, 100], { hooks: { rollout: [{ name: 'smoke', http: { url } }] } });
    const state = start(spec).state;
    const call: Extract<Command, { kind: 'hook' }> = {
      id: 'c7',
      kind: 'hook',
      point: 'rollout',
      index: 0,
      name: 'smoke',
      weight: 10,
    };
    // The first run, then the same in-flight command dispatched again (as a resume does).
    expect(await runHookCommand(state, call, options())).toMatchObject({ ok: true });
    expect(await runHookCommand(state, call, options())).toMatchObject({ ok: true });
    expect(await runHookCommand(state, { ...call, id: 'c9' }, options())).toMatchObject({ ok: true });
    const payloads = bodies.map((body) => JSON.parse(body) as { id: string; attempt: number });
    expect(payloads.map((p) => [p.id, p.attempt])).toEqual([
      [`${spec.id}.c7`, 1],
      [`${spec.id}.c7`, 1],
      [`${spec.id}.c9`, 1],
    ]);
  });

  it('is in a command hook environment as CUTOVER_HOOK_ID and on its stdin', async () => {
    const out = path.join(dir, 'id.txt');
    const file = path.join(dir, 'hook.sh');
    writeFileSync(file, `#!/bin/sh\ncat > ${out}.json; echo "$CUTOVER_HOOK_ID" > ${out}\n`, { mode: 0o755 });
    const spec = holdSpec([10, 100], { hooks: { postRollout: [{ name: 'tell', command: [file] }] } });
    const call: Extract<Command, { kind: 'hook' }> = {
      id: 'c12',
      kind: 'hook',
      point: 'postRollout',
      index: 0,
      name: 'tell',
    };
    expect(await runHookCommand(start(spec).state, call, options())).toMatchObject({ ok: true });
    expect(readFileSync(out, 'utf8').trim()).toBe(`${spec.id}.c12`);
    expect(JSON.parse(readFileSync(`${out}.json`, 'utf8'))).toMatchObject({ id: `${spec.id}.c12` });
  });
});
