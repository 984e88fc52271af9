/**
 * Two operators commit the same migration at once. The second read the migration as awaiting its
 * commit and found its runner alive; the first commit then ends it, and the runner exits with the
 * second's request in hand. The second must be told what the journal says (already committed),
 * not that the runner "does not answer" as if something were broken.
 *
 * The runner is real; so are both commits. Only the moment is arranged: the second commit reaches
 * the runner through a loopback relay of the test's, which holds the connection until the first
 * commit has ended the migration, then cuts it, as a runner exiting does.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { StateDir } from '../engine/store/state-dir.js';
import { type CliResult, runCli } from './support/cli.js';
import {
  isFinal,
  migrateDetached,
  releaseGate,
  type Workspace,
  waitFor,
  workspace,
} from './support/migrations.js';

const spaces: Workspace[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  for (const w of spaces.splice(0)) await w.cleanup();
});

it('a commit whose runner ended the migration under it is refused as already committed', async () => {
  const w = await workspace(undefined, (y) => y.replace('commit: auto', 'commit: manual'));
  spaces.push(w);
  releaseGate(w);
  const id = await migrateDetached(w);
  await waitFor(w, id, (s) => s.lifecycle === 'awaiting_commit');

  const runnerFile = StateDir.at(w.stateDir).migration('gated', id).runner;
  const record = readFileSync(runnerFile, 'utf8');
  let first: Promise<CliResult> | undefined;
  const relay = createServer((held: Socket) => {
    held.pause();
    // The second commit is in hand: the record goes back, the first commit ends the migration.
    writeFileSync(runnerFile, record);
    first = runCli(['topology', 'migration', 'commit', id, '-f', w.file]);
    void first.then(() => held.destroy());
  });
  servers.push(relay);
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const port = (relay.address() as { port: number }).port;
  writeFileSync(runnerFile, JSON.stringify({ ...JSON.parse(record), port }));

  const second = await runCli(['topology', 'migration', 'commit', id, '-f', w.file, '--json']);
  expect((await first)?.code).toBe(0);
  expect((await waitFor(w, id, isFinal)).lifecycle).toBe('completed');
  expect(second.code).toBe(1);
  expect(JSON.parse(second.stdout).error).toMatchObject({
    code: 'VERB_REFUSED',
    message: expect.stringMatching(/^cannot commit mig_\w+: it is already committed/),
  });
}, 60_000);
