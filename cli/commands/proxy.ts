import type { Command } from 'commander';
import { type CommandRun, pathIn } from '../context.js';
import { addStateDirOptions, resolveStateDir, type StateDirOptions } from '../state-dir.js';

export function registerProxy(program: Command, run: CommandRun): void {
  addStateDirOptions(program.command('proxy'))
    .description('run the router: serve every route of a state directory from its routing table')
    .option(
      '--control-listen <host:port>',
      'a fixed address for the control API and /metrics, kept for later routers of this state directory',
    )
    .addHelpText(
      'after',
      `
Migrations start a router on demand; run it yourself to keep it under a supervisor. It listens on
the routes' addresses, reloads the table when it changes, and answers its control API on a
random port of 127.0.0.1 (address and token in <state-dir>/router/router.json), or on the
address of --control-listen, which later routers of the state directory keep (a restart, one a
migration starts), so a Prometheus scrape configuration survives them. SIGTERM stops it after
the requests in flight finish.

Example:
  $ cutover proxy -f examples/live-demo/topology.yaml`,
    )
    .action(
      run.action(async (options: StateDirOptions & { controlListen?: string }) => {
        const stateDir = resolveStateDir(
          {
            ...(options.file === undefined ? {} : { file: pathIn(run, options.file) }),
            ...(options.stateDir === undefined ? {} : { stateDir: pathIn(run, options.stateDir) }),
          },
          run.env,
        );
        const log = (line: string) => run.stdout.write(`${new Date().toISOString()} ${line}\n`);
        const { startRouter } = await import('../../router/router.js');
        const router = await startRouter({
          stateDir: stateDir.root,
          log,
          ...(options.controlListen === undefined ? {} : { controlListen: options.controlListen }),
        });
        log(`router for ${stateDir.root} (pid ${process.pid}, control port ${router.controlPort})`);
        if (options.controlListen !== undefined)
          log(
            `control API and /metrics on ${router.controlAddress}, kept for the next routers of ${stateDir.root}`,
          );
        await new Promise<void>((resolve) => {
          const stop = (signal: string) => {
            log(`${signal}: closing listeners, finishing requests in flight`);
            void router.close().then(resolve);
          };
          process.once('SIGTERM', () => stop('SIGTERM'));
          process.once('SIGINT', () => stop('SIGINT'));
        });
        return 0;
      }),
    );
}
