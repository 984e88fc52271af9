/**
 * Observing a replica's port (process and container drivers): a SYN dropped once is not a replica
 * that does not answer. ci (s16/pg's runs): a plan saw a running container replica as "not
 * answering" right after podman removed other containers (its network drops SYNs then; the client
 * sends the SYN again after 1 s, the length of the one try there was), and migrate refused.
 * A real listener whose accept queue is full drops the SYN the same way (the kernel's own rule).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { replicaAnswers } from '../../../engine/drivers/process-observe.js';
import { repoRoot } from '../../support/cli.js';

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) child.kill('SIGKILL');
});

/** The listener of test/fixtures/full-accept-queue.py, accepting after `seconds`; its port. */
async function fullQueue(seconds: number): Promise<number> {
  const child = spawn(
    'python3',
    [path.join(repoRoot, 'test', 'fixtures', 'full-accept-queue.py'), String(seconds)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  started.push(child);
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout?.setEncoding('utf8').once('data', (chunk: string) => resolve(chunk.trim()));
    child.once('exit', (code) => reject(new Error(`full-accept-queue.py exited ${code}`)));
  });
  return Number(line);
}

describe('replicaAnswers', () => {
  it('counts a replica whose first SYN was dropped as answering (the second try waits past the resend)', async () => {
    const port = await fullQueue(1.5);
    const seen = await replicaAnswers(`127.0.0.1:${port}`, new AbortController().signal);
    expect(seen).toMatchObject({ ok: true });
  }, 15_000);

  it('says a port nothing listens on is not answering (refused)', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise((resolve) => server.close(resolve));
    const seen = await replicaAnswers(`127.0.0.1:${port}`, new AbortController().signal);
    expect(seen).toMatchObject({ ok: false, summary: 'connection refused' });
  });

  it('says a port that never accepts is not answering, after both tries', async () => {
    const port = await fullQueue(3_600);
    const seen = await replicaAnswers(`127.0.0.1:${port}`, new AbortController().signal);
    expect(seen).toMatchObject({ ok: false, summary: 'no answer within 3s' });
  }, 15_000);
});
