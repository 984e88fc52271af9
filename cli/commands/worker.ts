import type { Command } from 'commander';
import { CutoverError } from '../../core/errors.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { type CommandRun, pathIn } from '../context.js';

export function registerWorker(program: Command, run: CommandRun): void {
  program
    .command('worker')
    .description('run migrations from Temporal (WORKFLOW_HOST): workflows and driver calls')
    .option(
      '--state-dir <dir>',
      "where this machine's drivers keep their records (default: CUTOVER_STATE_DIR, else ./.cutover)",
    )
    .option('--task-queue <name>', 'the task queue (default: TEMPORAL_TASK_QUEUE, else cutover)')
    .option(
      '--host <name>',
      "this machine's name for topologies (drivers.<name>.runsOn): its calls come to this worker (default: local)",
    )
    .addHelpText(
      'after',
      `
Needs WORKFLOW_HOST=host:port (and TEMPORAL_NAMESPACE, TEMPORAL_TLS_CERT/KEY/CA or
TEMPORAL_API_KEY where your Temporal needs them). Run as many as you like: a migration whose
worker dies goes on on another one. SIGTERM stops taking work and lets calls in flight finish.
On several machines, start each with --host NAME: the calls of a driver with runsOn: NAME run
on that machine's worker only (its processes, its router, its records); the rest on any worker.

Example:
  $ WORKFLOW_HOST=127.0.0.1:7233 cutover worker --state-dir /var/lib/cutover`,
    )
    .action(
      run.action(async (options: { stateDir?: string; taskQueue?: string; host?: string }) => {
        const { probe, temporalSettings, unreachable } = await import('../../engine/temporal/connection.js');
        const settings = temporalSettings(run.env);
        if (!settings)
          throw new CutoverError('USAGE', 'cutover worker needs WORKFLOW_HOST=host:port (Temporal frontend)');
        // Before the SDK loads (~0.7 CPU-s): a worker pointed at a closed port or an unknown host
        // says so at once, having loaded next to nothing. startWorker probes again (the server's
        // worker comes that way), which costs one more connection.
        await probe(settings, run.env).catch((error: unknown) => {
          throw unreachable(settings, error);
        });
        if (options.taskQueue) settings.taskQueue = options.taskQueue;
        const { defaultHost, hostNameProblem } = await import('../../core/topology/hosts.js');
        const host = options.host ?? defaultHost;
        const problem = hostNameProblem(host);
        if (problem !== null) throw new CutoverError('USAGE', `--host ${host}: ${problem}`);
        const stateDir = StateDir.of({
          given: options.stateDir === undefined ? undefined : pathIn(run, options.stateDir),
          env: run.env,
          topologyDir: run.cwd,
        });
        const { startWorker } = await import('../../engine/temporal/worker.js');
        const { defaultDrivers } = await import('../../engine/drivers/default-drivers.js');
        const { processSecrets } = await import('../../engine/secrets/secret-source.js');
        const worker = await startWorker({
          settings,
          host,
          stateDir,
          drivers: defaultDrivers(),
          secrets: processSecrets(run.env),
          log: (line) => run.stderr.write(`${line}\n`),
        });
        run.stderr.write(
          `cutover worker on ${settings.address} (namespace ${settings.namespace}, task queue ${settings.taskQueue}, host ${host}; pid ${process.pid}; state ${stateDir.root})\n`,
        );
        const stop = (signal: string) => {
          run.stderr.write(`${signal}: finishing driver calls in flight\n`);
          void worker.shutdown();
        };
        process.once('SIGTERM', () => stop('SIGTERM'));
        process.once('SIGINT', () => stop('SIGINT'));
        await worker.done;
        return 0;
      }),
    );
}
