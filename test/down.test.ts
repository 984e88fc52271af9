import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readCurrentLayout } from '../engine/store/layout-store.js';
import { StateDir } from '../engine/store/state-dir.js';
import { repoRoot, runCli } from './support/cli.js';
import { migrateDetached, releaseGate, type Workspace, waitFor, workspace } from './support/migrations.js';
import { eventually } from './support/wait.js';

const spaces: Workspace[] = [];
afterEach(async () => {
  for (const w of spaces.splice(0)) await w.cleanup();
});

describe('cutover topology down', () => {
  it('stops every component and route of the environment and records an empty layout', async () => {
    const w = await workspace('examples/exec-demo');
    spaces.push(w);
    expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
    const slots = path.join(w.stateDir, 'exec-demo');
    const live = () => readdirSync(slots).filter((d) => existsSync(path.join(slots, d, 'ready')));
    expect(live()).toHaveLength(2);

    const down = await runCli(['topology', 'down', '-f', w.file, '--yes']);
    expect(down.code).toBe(0);
    expect(down.stdout).toBe('exec-demo: stopped 2 components and 0 routes\n');
    expect(live()).toEqual([]);
    const layout = await readCurrentLayout(StateDir.at(w.stateDir), 'exec-demo');
    expect(layout).toMatchObject({ serial: 2, topology: null });

    expect((await runCli(['topology', 'down', '-f', w.file, '--yes'])).stdout).toBe(
      'exec-demo: nothing is running\n',
    );
    const plan = JSON.parse((await runCli(['topology', 'plan', '-f', w.file, '--json'])).stdout);
    expect(plan.summary).toEqual({ add: 2, change: 0, remove: 0 });
  });

  it('asks on a terminal, refuses without one and without --yes, and says when nothing was ever recorded', async () => {
    const w = await workspace('examples/exec-demo');
    spaces.push(w);
    const unknown = await runCli(['topology', 'down', '-f', w.file, '--yes']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(
      /^cutover: environment exec-demo has no recorded layout in .*: it was never migrated/,
    );

    expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
    const refused = await runCli(['topology', 'down', '-f', w.file]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      'cutover: refusing to take environment exec-demo down without confirmation: standard input is not a terminal; pass --yes\n',
    );
    expect((await readCurrentLayout(StateDir.at(w.stateDir), 'exec-demo')).serial).toBe(1);

    // On a terminal (a pseudo-terminal from script(1)): a "no" keeps everything, a "yes" takes it down.
    const onTerminal = (answer: string) =>
      new Promise<{ code: number; out: string }>((resolve) => {
        const command = `node ${path.join(repoRoot, 'bin', 'cutover.js')} topology down -f ${w.file}`;
        const child = execFile(
          'script',
          ['-qec', command, '/dev/null'],
          { env: { ...process.env, NO_COLOR: '1' }, timeout: 30_000 },
          (error, stdout) => resolve({ code: error ? Number(error.code ?? 1) : 0, out: stdout }),
        );
        // Answered once asked: the prompt is on the terminal before any input is read.
        let seen = '';
        child.stdout?.on('data', (chunk: Buffer) => {
          seen += chunk.toString();
          if (seen.includes('Enter a value:')) {
            child.stdin?.write(`${answer}\n`);
            seen = '';
          }
        });
      });
    const declined = await onTerminal('no');
    expect(declined.out).toContain('Take environment exec-demo down?');
    expect(declined.code).toBe(1);
    expect((await readCurrentLayout(StateDir.at(w.stateDir), 'exec-demo')).serial).toBe(1);
    const confirmed = await onTerminal('yes');
    expect(confirmed.code).toBe(0);
    expect(confirmed.out).toContain('exec-demo: stopped 2 components and 0 routes');
    expect((await readCurrentLayout(StateDir.at(w.stateDir), 'exec-demo')).serial).toBe(2);
  });

  it('is refused while a migration is in flight', async () => {
    const w = await workspace();
    spaces.push(w);
    const id = await migrateDetached(w);
    await waitFor(w, id, (s) => s.status.includes('health_gate'));
    const down = await runCli(['topology', 'down', '-f', w.file, '--yes']);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain(`environment gated has a migration in flight: ${id}; cancel it first`);
    releaseGate(w);
  });
  it('holds the environment while it runs: a migration started meanwhile is refused, not run beside it', async () => {
    const w = await workspace('examples/exec-demo');
    spaces.push(w);
    expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
    // down's retire of api waits for a gate file, so the test can act while down is under way.
    const started = path.join(w.dir, 'down-retire-started');
    const gate = path.join(w.dir, 'down-gate');
    const retire = path.join(path.dirname(w.file), 'infra', 'retire');
    writeFileSync(
      retire,
      readFileSync(retire, 'utf8').replace(
        'set -eu',
        `set -eu\nif [ "$CUTOVER_MIGRATION_ID" = down ]; then touch ${started}; while [ ! -e ${gate} ]; do sleep 0.05; done; fi`,
      ),
    );
    const down = runCli(['topology', 'down', '-f', w.file, '--yes']);
    await eventually(() => existsSync(started), 30_000);

    writeFileSync(
      w.file,
      readFileSync(w.file, 'utf8').replace('version: "1" # change it', 'version: "2" # change it'),
    );
    const meanwhile = await runCli(['topology', 'migrate', '-f', w.file, '--yes']);
    writeFileSync(gate, '');
    expect(meanwhile.code).toBe(1);
    expect(meanwhile.stderr).toMatch(
      /^cutover: environment exec-demo is being taken down by process \d+ \(cutover topology down\); run this again once it has ended$/m,
    );
    expect((await down).code).toBe(0);
    // Nothing runs that the record does not know: the empty layout is the truth, and a plan adds both again.
    const slots = path.join(w.stateDir, 'exec-demo');
    expect(readdirSync(slots).filter((d) => existsSync(path.join(slots, d, 'ready')))).toEqual([]);
    expect(await readCurrentLayout(StateDir.at(w.stateDir), 'exec-demo')).toMatchObject({ topology: null });
    const plan = JSON.parse((await runCli(['topology', 'plan', '-f', w.file, '--json'])).stdout);
    expect(plan.summary).toEqual({ add: 2, change: 0, remove: 0 });
  }, 60_000);

  it('says which driver failed, stops nothing twice, and finishes when run again', async () => {
    const w = await workspace('examples/exec-demo');
    spaces.push(w);
    expect((await runCli(['topology', 'migrate', '-f', w.file, '--yes'])).code).toBe(0);
    // api's retire script fails (as a cloud API refusing would); db is stopped after it (it depends on db).
    const retire = path.join(path.dirname(w.file), 'infra', 'retire');
    const script = readFileSync(retire, 'utf8');
    writeFileSync(
      retire,
      script.replace(
        'set -eu',
        'set -eu\nif [ "$CUTOVER_COMPONENT" = api ]; then echo "quota API refused" >&2; exit 3; fi',
      ),
    );
    const failed = await runCli(['topology', 'down', '-f', w.file, '--yes']);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(
      /^cutover: taking exec-demo down failed at component api: retire script exited with code 3/m,
    );
    expect(failed.stderr).toMatch(/quota API refused; what was stopped stays stopped: fix the cause/);
    expect(failed.stderr).not.toContain('internal error');
    expect((await readCurrentLayout(StateDir.at(w.stateDir), 'exec-demo')).serial).toBe(1);

    writeFileSync(retire, script);
    const again = await runCli(['topology', 'down', '-f', w.file, '--yes']);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe('exec-demo: stopped 2 components and 0 routes\n');
    expect(await readCurrentLayout(StateDir.at(w.stateDir), 'exec-demo')).toMatchObject({
      serial: 2,
      topology: null,
    });
  });
});
