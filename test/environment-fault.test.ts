import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { reportError } from '../cli/report-error.js';
import { environmentFault } from '../core/errors.js';

function stderrOf(error: unknown): { text: string; exit: number } {
  let text = '';
  const sink = {
    write(s: string) {
      text += s;
      return true;
    },
  } as NodeJS.WritableStream;
  const exit = reportError(error, { json: false, stdout: sink, stderr: sink });
  return { text, exit };
}

describe('environment faults', () => {
  const cleanup: Array<() => void> = [];
  afterEach(() => {
    for (const f of cleanup.splice(0)) f();
  });

  it('a port in use is one line naming the address, exit 1, not an internal error', async () => {
    const first = createServer();
    await new Promise<void>((resolve) => first.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => first.close());
    const port = (first.address() as { port: number }).port;
    const second = createServer();
    const error = await new Promise<Error>((resolve) => {
      second.once('error', resolve);
      second.listen(port, '127.0.0.1');
    });
    const { text, exit } = stderrOf(error);
    expect(exit).toBe(1);
    expect(text).toBe(
      `cutover: listen 127.0.0.1:${port}: the address is already in use (EADDRINUSE); stop the program listening there, or choose another port\n`,
    );
  });

  it('a write refused by the file system names the file', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cutover-fault-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    let error: unknown;
    try {
      writeFileSync(path.join(dir, 'missing-dir', 'x'), 'x');
    } catch (e) {
      error = e;
    }
    // ENOENT on a write is not an environment fault of this kind: it stays the caller's to name.
    expect(environmentFault(error)).toBeUndefined();
    const full = Object.assign(new Error('ENOSPC: no space left on device, write'), {
      code: 'ENOSPC',
      syscall: 'write',
      path: '/var/lib/cutover/journal.jsonl',
    });
    const { text, exit } = stderrOf(full);
    expect(exit).toBe(1);
    expect(text).toBe(
      'cutover: write /var/lib/cutover/journal.jsonl: no space left on the device (ENOSPC); free some space, then try again\n',
    );
    expect(environmentFault(full, 'appending to .cutover/x.jsonl')?.message).toMatch(
      /^appending to \.cutover\/x\.jsonl: no space/,
    );
  });

  it('a program that is not installed says so, naming it', async () => {
    const child = spawn('cutover-no-such-program-for-this-test');
    const error = await new Promise<Error>((resolve) => child.once('error', resolve));
    const { text, exit } = stderrOf(error);
    expect(exit).toBe(1);
    expect(text).toMatch(
      /program not found: cutover-no-such-program-for-this-test; install it or put it on the PATH/,
    );
    expect(text).not.toMatch(/internal error/);
  });
});
