import type { Command } from 'commander';
import { StateDir } from '../../engine/store/state-dir.js';
import type { CommandRun } from '../context.js';

/** Commands cutover runs itself (a detached runner); hidden from help. */
export function registerInternal(program: Command, run: CommandRun): void {
  const internal = program.command('internal', { hidden: true });
  internal
    .command('run-migration')
    .argument('<id>')
    .requiredOption('--state-dir <dir>')
    .requiredOption('--environment <name>')
    .action(
      run.action(async (id: string, options: { stateDir: string; environment: string }) => {
        const { defaultDrivers } = await import('../../engine/drivers/default-drivers.js');
        const { hostMigration } = await import('../../engine/services/migrations.js');
        const { processSecrets } = await import('../../engine/secrets/secret-source.js');
        // The runner's edge: the secrets its starter handed it in its environment.
        const secrets = processSecrets(run.env);
        // Stopped by a signal: leave the migration in flight for the next runner to pick up. Taken
        // before the migration is hosted: hosting starts its first commands (a notify command runs
        // in a process group of its own), and a SIGTERM then, by default, ended the runner without
        // stopping them (ci40: the notify command outlived its runner).
        let hosted: Awaited<ReturnType<typeof hostMigration>> | undefined;
        let signalled = false;
        const stop = () => {
          signalled = true;
          if (hosted) void hosted.stop().then(() => process.exit(143));
        };
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
        hosted = await hostMigration(
          StateDir.at(options.stateDir),
          options.environment,
          id,
          defaultDrivers(),
          secrets,
        );
        if (signalled) {
          await hosted.stop();
          process.exit(143);
        }
        const final = await hosted.runner.done();
        run.stdout.write(`${new Date().toISOString()} ${id}: ${final.lifecycle}\n`);
        // The migration has ended (its claim released): stay up, within a bound, for its last notifications.
        await hosted.runner.deliveries();
        return 0;
      }),
    );
}
