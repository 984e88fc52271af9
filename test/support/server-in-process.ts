/**
 * A `cutover server` built in the test's own process: the same flags parsed by the CLI's own
 * `server` command (commander, its defaults), the same service, worker, adopter and `buildServer`
 * as `cutover server --state-dir … --workdir … --tokens-file …` gives, without a process or,
 * unless asked, a port. Requests reach it through Fastify's `inject`. Migrations it starts still
 * run in their real, detached runner processes (the harness's cleanup kills them by pid).
 */
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Command } from 'commander';
import type { FastifyInstance } from 'fastify';
import { registerServer } from '../../cli/commands/server.js';
import { commandRun } from '../../cli/context.js';
import { openEngineService } from '../../engine/services/migration-service.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { adoptOrphansEvery } from '../../server/adopt-orphans.js';
import { buildServer, type CutoverServer } from '../../server/app.js';
import { createTokenStore, parseTokensEnv, readTokensFile } from '../../server/auth.js';
import { isLoopback } from '../../server/start.js';
import { repoRoot } from './cli.js';

export interface InProcessOptions {
  stateDir: string;
  /** `--workdir` (default: the repository, as the spawned servers have). */
  workdir?: string;
  /** `cutover server` flags, parsed by the CLI's own command (`--rate-limit 0`). */
  args?: string[];
  /** Added to the environment the server reads (CUTOVER_TOKENS, CUTOVER_HOOK_SECRET, WORKFLOW_HOST…). */
  env?: Record<string, string>;
  /** Also listen on 127.0.0.1 (a free port): for raw sockets and fetch. Default: inject only. */
  listen?: boolean;
}

export interface InProcessServer {
  app: FastifyInstance;
  stateDir: string;
  /** `http://127.0.0.1:<port>` when it listens, else null. */
  url: string | null;
  /** The request log (what `cutover server` writes to stdout). */
  stdout(): string;
  /** The adopter's lines (what `cutover server` writes to stderr). */
  stderr(): string;
  /** Whether close() has run. */
  readonly closed: boolean;
  /** As SIGTERM does: stops adopting, closes the server, the worker and the service. */
  close(): Promise<void>;
}

/** The flags as `cutover server` parses them: the CLI's command, its action replaced. */
async function parseServerFlags(args: string[]): Promise<Record<string, unknown>> {
  const program = new Command().exitOverride();
  // The action is replaced below: the context is never written to.
  const context = {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    cwd: repoRoot,
  };
  registerServer(program, '0.0.0-test', commandRun(context));
  const command = program.commands.find((c) => c.name() === 'server');
  if (!command) throw new Error('no server command');
  let parsed: Record<string, unknown> | undefined;
  command.exitOverride().action((options: Record<string, unknown>) => {
    parsed = options;
  });
  await program.parseAsync(['server', ...args], { from: 'user' });
  if (!parsed) throw new Error(`cutover server ${args.join(' ')}: not parsed`);
  return parsed;
}

/** Builds the server `cutover server --state-dir <stateDir> --workdir <workdir> <args>` would run. */
export async function startInProcess(options: InProcessOptions): Promise<InProcessServer> {
  const flags = await parseServerFlags(options.args ?? []);
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
  if (options.env?.CUTOVER_TOKENS === undefined) delete env.CUTOVER_TOKENS;
  const workdir = path.resolve(options.workdir ?? repoRoot);
  const stateDir = StateDir.at(options.stateDir);
  const entries = [
    ...(typeof flags.tokensFile === 'string' ? readTokensFile(flags.tokensFile) : []),
    ...(env.CUTOVER_TOKENS ? parseTokensEnv(env.CUTOVER_TOKENS) : []),
  ];
  const tokens = entries.length > 0 ? createTokenStore(entries) : null;
  const host = String(flags.host);
  if (tokens === null && !isLoopback(host)) throw new Error(`${host} without tokens: use startRefused`);
  const out = { stdout: '', stderr: '' };
  const service = await openEngineService({ stateDir, stateDirOption: ` --state-dir ${stateDir.root}`, env });
  const worker = await service.hostWorker(stateDir, flags.worker !== false);
  let server: CutoverServer;
  try {
    server = await buildServer({
      service,
      stateDir,
      workdir,
      tokens,
      bodyLimit: Number(flags.bodyLimit),
      rateLimitPerMinute: Number(flags.rateLimit),
      logStreams: { total: Number(flags.maxLogStreams), perClient: Number(flags.maxLogStreamsPerToken) },
      logLevel: String(flags.logLevel),
      logDestination: {
        write(line: string) {
          out.stdout += line;
        },
      },
      ...(env.CUTOVER_HOOK_SECRET ? { hookSecret: env.CUTOVER_HOOK_SECRET } : {}),
      version: '0.0.0-test',
    });
  } catch (error) {
    await worker.shutdown();
    await service.close();
    throw error;
  }
  let url: string | null = null;
  if (options.listen) {
    await server.app.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
  }
  const adopter =
    flags.adopt === false
      ? { stop: async () => {} }
      : adoptOrphansEvery(service, (line) => {
          out.stderr += `${line}\n`;
        });
  let closed = false;
  return {
    app: server.app,
    stateDir: options.stateDir,
    url,
    stdout: () => out.stdout,
    stderr: () => out.stderr,
    get closed() {
      return closed;
    },
    async close() {
      if (closed) return;
      closed = true;
      await adopter.stop();
      await server.close();
      await worker.shutdown();
    },
  };
}
