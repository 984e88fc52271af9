/**
 * A route whose listen address another program holds: the step that asks the router to serve it
 * fails, naming the address and the cause, and the migration does not report success (issue 16,
 * item 2). Real CLI (compiled dist/: run `npm run build` first), real router, real replicas, and a
 * real listener of another program on the route's port.
 */
import { execFile } from 'node:child_process';
import { chownSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import { type CliResult, repoRoot, runCli } from '../support/cli.js';
import { liveWorkspace, show, type Workspace } from '../support/migrations.js';

/**
 * What one test made, removed when it ends (the tests run at once, each in its own workspace: most
 * of a test is the migration's retries of the route step): the other programs' servers, then the
 * workspaces.
 */
function made(context: TestContext) {
  const spaces: Workspace[] = [];
  const holders: Server[] = [];
  context.onTestFinished(async () => {
    for (const holder of holders) {
      holder.closeAllConnections();
      await new Promise((resolve) => holder.close(resolve));
    }
    for (const w of spaces) await w.cleanup();
  });
  return {
    space: (w: Workspace) => spaces.push(w),
    holdAddress: (url: string) => holdAddress(url, holders),
  };
}

/** Another program's HTTP server on `url`'s address, answering "other program". */
async function holdAddress(url: string, holders: Server[]): Promise<void> {
  const { hostname, port } = new URL(url);
  const holder = createServer((_req, res) => res.end('other program'));
  holders.push(holder);
  await new Promise<void>((resolve, reject) => {
    holder.once('error', reject);
    holder.listen(Number(port), hostname, () => resolve());
  });
}

/** The live demo migrated once (its first deployment), removed when the test ends; its route's address. */
async function migratedOnce(context: TestContext) {
  const test = made(context);
  const w = await liveWorkspace();
  test.space(w);
  const first = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
  expect(first.code, first.stderr).toBe(0);
  return { test, w, address: new URL(w.url).host };
}

async function answer(url: string): Promise<string> {
  return (await fetch(url, { headers: { connection: 'close' } })).text();
}

const migrationId = (text: string) => /(mig_[0-9a-z]+)/.exec(text)?.[1] as string;

describe.concurrent('a route address held by another program', () => {
  it('fails the migration that adds the route, naming the address and "in use"', async (context) => {
    const test = made(context);
    const w = await liveWorkspace();
    test.space(w);
    const address = new URL(w.url).host;
    await test.holdAddress(w.url);

    const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(result.stdout + result.stderr).not.toMatch(/: completed$/m);
    expect(result.code, result.stdout + result.stderr).toBe(1);
    const id = migrationId(result.stdout + result.stderr);
    const summary = await show(w, id);
    expect(summary.lifecycle).toBe('failed');
    expect(summary.reason).toContain(address);
    expect(summary.reason).toMatch(/already in use/);
    expect(result.stderr).toContain(summary.reason as string);
    expect(await answer(w.url)).toBe('other program');
  });

  it("refuses a route on the address of another environment's route of the state directory, which keeps serving it", async (context) => {
    const { w, address } = await migratedOnce(context);
    // Other environments beside it (same directory: same state directory, same router), their
    // route on its address; one named before it and one after (the router orders routes by name).
    for (const name of ['a-shop', 'z-shop']) {
      const other = path.join(path.dirname(w.file), `${name}.yaml`);
      writeFileSync(
        other,
        readFileSync(w.file, 'utf8')
          .replace('name: live-demo', `name: ${name}`)
          .replace('version: "1.0.0"', 'version: "9.0.0"'),
      );
      const second = await runCli(['topology', 'migrate', '-f', other, '--yes']);
      expect(second.code, second.stdout + second.stderr).toBe(1);
      const summary = await show(w, migrationId(second.stdout + second.stderr));
      expect(summary.lifecycle).toBe('failed');
      expect(summary.reason).toContain(
        `route www cannot listen on ${address}: route www of environment live-demo listens there`,
      );
      // The first environment's clients still reach its own app, and its route is served.
      expect(JSON.parse(await answer(w.url))).toMatchObject({ version: '1.0.0' });
      const status = await runCli(['topology', 'status', '-f', w.file, '--json']);
      expect(JSON.parse(status.stdout).routes[0].state).toBe('served');
    }
  });

  it('fails the step when a router started afresh cannot take the address back', async (context) => {
    const { test, w, address } = await migratedOnce(context);
    expect(JSON.parse(await answer(w.url))).toMatchObject({ version: '1.0.0' });

    // The router dies; another program takes its address before the next migration starts one.
    const record = path.join(w.stateDir, 'router', 'router.json');
    const routerPid = (JSON.parse(readFileSync(record, 'utf8')) as { pid: number }).pid;
    process.kill(routerPid, 'SIGKILL');
    await waitGone(routerPid);
    await test.holdAddress(w.url);

    writeFileSync(w.file, readFileSync(w.file, 'utf8').replace('version: "1.0.0"', 'version: "1.1.0"'));
    const second = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(second.stdout + second.stderr).not.toMatch(/: completed$/m);
    expect(second.code, second.stdout + second.stderr).toBe(1);
    // A router was started afresh: by the route step, or by the runner's supervision of the router
    // (issue 26, item 4), whichever came first.
    const restarted = JSON.parse(readFileSync(record, 'utf8')) as { pid: number };
    expect(restarted.pid).not.toBe(routerPid);
    const summary = await show(w, migrationId(second.stdout + second.stderr));
    expect(summary.lifecycle).toBe('failed');
    expect(summary.reason).toContain(address);
    expect(summary.reason).toMatch(/already in use/);
    expect(await answer(w.url)).toBe('other program');
  });

  it('fails the migration when the address is refused: permission denied, with what to do', async (context) => {
    const test = made(context);
    // A port below 1024 is refused to a user without CAP_NET_BIND_SERVICE: the CLI runs as nobody
    // when the tests run as root. (The port is never bound, so any such number serves.)
    const port = 1 + Math.floor(Math.random() * 1023);
    const w = await liveWorkspace((yaml) =>
      yaml.replace(/listen: 127\.0\.0\.1:\d+/, `listen: 127.0.0.1:${port}`),
    );
    test.space(w);
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      chownSync(w.dir, nobody, nobody);
      chownTree(w.dir);
    }

    const result = await runCliAs(asRoot, ['topology', 'migrate', '-f', w.file, '--yes']);
    expect(result.stdout + result.stderr).not.toMatch(/: completed$/m);
    expect(result.code, result.stdout + result.stderr).toBe(1);
    const summary = await show(w, migrationId(result.stdout + result.stderr));
    expect(summary.lifecycle).toBe('failed');
    expect(summary.reason).toContain(
      `route www cannot listen on 127.0.0.1:${port}: permission denied (EACCES); ports below 1024 need root or CAP_NET_BIND_SERVICE`,
    );
  });
});

describe.concurrent('a router the driver cannot start', () => {
  it("fails the step with one line: the router's last word and where its output is", async (context) => {
    const test = made(context);
    // A damaged state directory: where the router's record goes, a directory. Every router the
    // driver starts (one per attempt) exits at once, each adding its line to router.out.
    const w = await liveWorkspace();
    test.space(w);
    const record = path.join(w.stateDir, 'router', 'router.json');
    mkdirSync(record, { recursive: true });

    const result = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    expect(result.code, result.stdout + result.stderr).toBe(1);
    const summary = await show(w, migrationId(result.stdout + result.stderr));
    expect(summary.lifecycle).toBe('failed');
    expect(summary.reason).not.toContain('\n');
    expect(summary.reason).toMatch(
      new RegExp(
        `the router for ${w.stateDir} did not start: cannot take ${record}: it is no live router's record and cannot be replaced; if no router runs, move it away \\(its output: ${path.dirname(record)}/router\\.out\\)$`,
      ),
    );
  });
});

const nobody = 65534;

function chownTree(dir: string): void {
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: false }) as string[])
    chownSync(path.join(dir, entry), nobody, nobody);
}

/** The real CLI, as the user nobody when `asNobody` (setpriv drops root before node starts). */
function runCliAs(asNobody: boolean, args: string[]): Promise<CliResult> {
  if (!asNobody) return runCli(args);
  return new Promise((resolve) => {
    const drop = ['--reuid', String(nobody), '--regid', String(nobody), '--clear-groups'];
    execFile(
      'setpriv',
      [...drop, process.execPath, path.join(repoRoot, 'bin', 'cutover.js'), ...args],
      { cwd: tmpdir(), env: { ...process.env, NO_COLOR: '1' }, timeout: 30_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
      },
    );
  });
}

/** Resolves once `pid` no longer exists (a SIGKILLed child of another process is reaped by init). */
async function waitGone(pid: number): Promise<void> {
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
