import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { CutoverError } from '../../core/errors.js';
import { maxPort } from '../../core/host-port.js';
import type { MigrationService } from '../../engine/services/migration-service.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { type CommandRun, pathIn } from '../context.js';
import { addHealOptions, type HealCommandOptions, healOptions } from '../heal-options.js';

interface ServerCommandOptions {
  host: string;
  port: string;
  stateDir?: string;
  workdir?: string;
  tokensFile?: string;
  bodyLimit: string;
  rateLimit: string;
  maxLogStreams: string;
  maxLogStreamsPerToken: string;
  logLevel: string;
  hookSecretFile?: string;
  worker: boolean;
  adopt: boolean;
}

type ServerCommandOptionsWithHeal = ServerCommandOptions & HealCommandOptions;

function integer(value: string, flag: string, min: number, max?: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || (max !== undefined && n > max)) {
    const range = max === undefined ? `≥ ${min}` : `from ${min} to ${max}`;
    throw new CutoverError('USAGE', `${flag} must be an integer ${range}, not ${value}`);
  }
  return n;
}

function readHookSecret(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (error) {
    throw new CutoverError('USAGE', `${file}: cannot read the hook secret file: ${(error as Error).message}`);
  }
}

export function registerServer(program: Command, version: string, run: CommandRun): void {
  addHealOptions(program.command('server'), 'every environment of the state directory')
    .description('serve the HTTP API: plan, apply and cancel, migrations, logs, metrics')
    .option('--host <address>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0: any free port)', '7400')
    .option(
      '--state-dir <dir>',
      'the state directory (default: CUTOVER_STATE_DIR, else .cutover/ in --workdir)',
    )
    .option(
      '--workdir <dir>',
      'relative topology paths in requests resolve here (default: the current directory)',
    )
    .option(
      '--tokens-file <file>',
      'bearer tokens and their roles (YAML); or set CUTOVER_TOKENS=name:role:token,…',
    )
    .option('--body-limit <bytes>', 'largest request body', String(1024 * 1024))
    .option(
      '--rate-limit <n>',
      'requests per minute per token, else per client address (a token that is not valid counts as its address); 0: no limit',
      '600',
    )
    .option(
      '--max-log-streams <n>',
      'live log streams (logs?follow=true) open at once, over every client; beyond, 429',
      '200',
    )
    .option(
      '--max-log-streams-per-token <n>',
      'live log streams one token (or, without tokens, one client address) may hold open at once',
      '20',
    )
    .option('--log-level <level>', 'fatal, error, warn, info, debug or silent', 'info')
    .option('--no-worker', 'in Temporal mode (WORKFLOW_HOST), do not run a worker in this process')
    .option(
      '--no-adopt',
      'do not adopt orphaned migrations (in flight, their runner dead): by default the server gives each a new runner, at start and every 3 s',
    )
    .option(
      '--hook-secret-file <file>',
      'the secret that signs Git webhooks (POST /v1/hooks/git); or set CUTOVER_HOOK_SECRET',
    )
    .addHelpText(
      'after',
      `
Without tokens the server listens on loopback only, and refuses any other address. Roles: viewer
(validate, plan, and every read) and operator (everything). The API is described at
GET /v1/openapi.json. Migrations run in background processes: stopping the server (SIGTERM) does
not stop them, and a restarted server shows them. A migration of the state directory whose runner
died (killed, crashed) is adopted: the server starts a new runner for it, as \`resume\` does, at
start and every 3 s, and logs one line per adoption (--no-adopt turns this off). Two servers on one
state directory never both adopt a migration.

Examples:
  $ cutover server
  $ cutover server --self-heal --heal-interval 30s
  $ CUTOVER_TOKENS=ci:operator:$(openssl rand -hex 24) cutover server --host 0.0.0.0 --port 7400
  $ curl -s localhost:7400/v1/plan -H 'content-type: application/json' \\
      -d "{\\"topology\\": $(jq -Rs . < topology.yaml)}"`,
    )
    .action(run.action((options: ServerCommandOptionsWithHeal) => runServer(options, version, run)));
}

async function runServer(
  options: ServerCommandOptionsWithHeal,
  version: string,
  run: CommandRun,
): Promise<number> {
  const { env } = run;
  const selfHeal = healOptions(options);
  const { readTokensFile, parseTokensEnv, createTokenStore } = await import('../../server/auth.js');
  const { startServer } = await import('../../server/start.js');
  const workdir = path.resolve(run.cwd, options.workdir ?? '.');
  const stateDir = StateDir.of({
    given: options.stateDir === undefined ? undefined : pathIn(run, options.stateDir),
    env,
    topologyDir: workdir,
  });
  const entries = [
    ...(options.tokensFile ? readTokensFile(pathIn(run, options.tokensFile)) : []),
    ...(env.CUTOVER_TOKENS ? parseTokensEnv(env.CUTOVER_TOKENS) : []),
  ];
  const tokens = entries.length > 0 ? createTokenStore(entries) : null;
  const hookSecret = options.hookSecretFile
    ? readHookSecret(pathIn(run, options.hookSecretFile))
    : env.CUTOVER_HOOK_SECRET;
  // Past 65535 Node throws a RangeError at the listen, which is no fault of cutover's.
  const port = integer(options.port, '--port', 0, maxPort);
  const bodyLimit = integer(options.bodyLimit, '--body-limit', 1);
  const rateLimitPerMinute = integer(options.rateLimit, '--rate-limit', 0);
  const logStreams = {
    total: integer(options.maxLogStreams, '--max-log-streams', 1),
    perClient: integer(options.maxLogStreamsPerToken, '--max-log-streams-per-token', 1),
  };
  const { openEngineService } = await import('../../engine/services/migration-service.js');
  const service = await openEngineService({
    stateDir,
    env,
    stateDirOption: ` --state-dir ${stateDir.root}`,
  });
  let worker: Awaited<ReturnType<typeof service.hostWorker>>;
  try {
    worker = await service.hostWorker(stateDir, options.worker);
  } catch (error) {
    // The service's open connection would keep the process alive after the error.
    await service.close();
    throw error;
  }
  const server = await startServer({
    service,
    host: options.host,
    port,
    stateDir,
    workdir,
    tokens,
    bodyLimit,
    rateLimitPerMinute,
    logStreams,
    logLevel: options.logLevel,
    ...(hookSecret ? { hookSecret } : {}),
    version,
  }).catch(async (error: unknown) => {
    // A server that cannot listen (a port in use) closes what it opened: the worker and the
    // service's Temporal connection would keep the process alive after the error is reported.
    await worker.shutdown().catch(() => undefined);
    await service.close().catch(() => undefined);
    throw error;
  });
  const { adoptOrphansEvery } = await import('../../server/adopt-orphans.js');
  const adopter = options.adopt
    ? adoptOrphansEvery(service, (line) => run.stderr.write(`${line}\n`))
    : { stop: async () => {} };
  run.stderr.write(
    `cutover server listening on ${server.url} (pid ${process.pid}; state ${stateDir.root}; ${
      tokens
        ? `${tokens.size} token${tokens.size === 1 ? '' : 's'}`
        : 'no tokens: loopback only, every caller is an operator'
    }; migrations: ${worker.description})\n`,
  );
  const heal = selfHeal ? await startSelfHeal(service, workdir, selfHeal, server.app.log) : null;
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      run.stderr.write(`${signal}: finishing requests in flight; migrations go on in their own processes\n`);
      void Promise.all([adopter.stop(), heal?.stop()])
        .then(() => server.close())
        .then(() => worker.shutdown())
        .then(resolve);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}

/**
 * `--self-heal`: every environment of the state directory (or that Temporal holds) kept as
 * recorded. Each repair is a line in the server's log, with the event as structured fields.
 */
async function startSelfHeal(
  service: MigrationService,
  workdir: string,
  options: { intervalMs: number; maxRepairsPerHour: number },
  log: { info(fields: object, message: string): void },
): Promise<{ stop(): Promise<void> }> {
  const { SelfHeal } = await import('../../engine/api.js');
  const heal = new SelfHeal({
    targets: async () =>
      (await service.environments()).map((e) => ({
        environment: e.environment,
        service,
        fallbackBaseDir: workdir,
      })),
    ...options,
    log: (line, event) => log.info(event ? { selfHeal: event } : {}, line),
  });
  heal.start();
  return heal;
}
