/**
 * `--secrets-file FILE`: where the secrets that topologies reference (`env: { X: { secret: X } }`)
 * are read, for the commands that plan or apply. It becomes CUTOVER_SECRETS_FILE (absolute) of the
 * command's environment (the process's, from the terminal), which the runners, workers and servers
 * it starts inherit; the engine reads it there.
 */
import path from 'node:path';
import type { Command } from 'commander';
import { CutoverError } from '../core/errors.js';
import type { CommandContext } from './context.js';

/**
 * The commands that read secrets, by their path: they plan (to tell a changed secret) or run
 * migrations. `topology rollback` runs one to an earlier layout; `topology migration rollback`
 * only undoes a migration, which needs no secret.
 */
const readingSecrets: ReadonlySet<string> = new Set([
  'topology plan',
  'topology migrate',
  'topology rollback',
  'server',
  'worker',
  'watch',
]);
/** Those that may go to a server, where the server's own secrets are read instead. */
const mayGoToServer: ReadonlySet<string> = new Set([
  'topology plan',
  'topology migrate',
  'topology rollback',
]);

/** `topology migrate` for the command `cutover topology migrate`. */
function pathOf(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

const help = `
Secrets: an env value { secret: NAME } is read where the migration runs, from $CUTOVER_SECRET_NAME
or from the line NAME=value of the secrets file (--secrets-file or CUTOVER_SECRETS_FILE; mode 0600,
outside the topology's Git work tree). Plans and logs show it as (sensitive).
  $ CUTOVER_SECRET_DB_PASSWORD=… cutover topology migrate -f topology.yaml
  $ cutover topology plan -f topology.yaml --secrets-file ~/.config/cutover/shop.env`;

interface SecretsFileOptions {
  secretsFile?: string;
  file?: string;
  server?: string;
}

/** Adds `--secrets-file` to every command that reads secrets under `program`. */
export function addSecretsFileOptions(program: Command, context: Pick<CommandContext, 'env' | 'cwd'>): void {
  const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];
  for (const command of all(program)) {
    const name = pathOf(command);
    if (!readingSecrets.has(name)) continue;
    command
      .option(
        '--secrets-file <file>',
        'read secrets from this NAME=value file (default: CUTOVER_SECRETS_FILE)',
      )
      .addHelpText('after', help)
      .hook('preAction', async (_, action) =>
        useSecretsFile(action.opts<SecretsFileOptions>(), mayGoToServer.has(name), context),
      );
  }
}

async function useSecretsFile(
  options: SecretsFileOptions,
  toServer: boolean,
  context: Pick<CommandContext, 'env' | 'cwd'>,
): Promise<void> {
  if (options.secretsFile === undefined) return;
  if (toServer && (options.server !== undefined || context.env.CUTOVER_SERVER)) {
    throw new CutoverError(
      'USAGE',
      '--secrets-file is read where migrations run: through a cutover server, give it to `cutover server` instead',
    );
  }
  const file = path.resolve(context.cwd, options.secretsFile);
  const { checkSecretsFile } = await import('../engine/api.js');
  // Checked now, so a refused file is one line before anything starts, not a failed migration.
  await checkSecretsFile(file, path.dirname(path.resolve(context.cwd, options.file ?? '.')));
  context.env.CUTOVER_SECRETS_FILE = file;
}
