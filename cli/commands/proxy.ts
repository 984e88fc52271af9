import type { Command } from 'commander';
import { CutoverError } from '../../core/errors.js';
import { formatDuration, parseDuration } from '../../core/topology/duration.js';
import { renderProxyRoutesJson, renderProxyRoutesText } from '../../views/render-proxy-routes.js';
import { type CommandRun, pathIn, styleOf } from '../context.js';
import { addStateDirOptions, resolveStateDir, type StateDirOptions } from '../state-dir.js';

export function registerProxy(program: Command, run: CommandRun): void {
  const proxy = addStateDirOptions(program.command('proxy'));
  registerPause(proxy, run);
  registerRoutes(proxy, run);
  proxy
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

/** `cutover proxy pause <route>` and `cutover proxy resume <route>`: an operator's maintenance pause. */
function registerPause(proxy: Command, run: CommandRun): void {
  // The state directory options are `proxy`'s: commander gives them to it wherever they stand.
  const stateDirOptions = () => proxy.opts<StateDirOptions>();
  proxy
    .command('pause <route>')
    .description("hold a route's new requests (maintenance) until `cutover proxy resume`")
    .option('--timeout <duration>', 'longest a request waits, then 503 with Retry-After', '30s')
    .option('--max-held <n>', 'most requests waiting at once; the next get 503 with Retry-After', '1000')
    .addHelpText(
      'after',
      `
<route> is <environment>/<route> as the router serves it, or the route alone when one environment
has it. Requests already in flight go on; new ones wait, unread, in the order they came. The pause
is kept in <state-dir>/router/pauses.json: a router started again is still paused.

Example:
  $ cutover proxy pause production/web --timeout 1m
  $ cutover proxy resume production/web`,
    )
    .action(
      run.action(async (route: string, options: { timeout: string; maxHeld: string }) => {
        const timeoutMs = parseDuration(options.timeout);
        const maxHeld = /^[0-9]{1,9}$/.test(options.maxHeld) ? Number(options.maxHeld) : Number.NaN;
        if (timeoutMs === undefined || timeoutMs <= 0)
          throw new CutoverError('USAGE', `--timeout ${options.timeout}: not a duration such as 30s or 2m`);
        if (Number.isNaN(maxHeld))
          throw new CutoverError('USAGE', `--max-held ${options.maxHeld}: not a whole number`);
        const { client, key } = await pausedRoute(run, route, stateDirOptions());
        const pause = await client.pause(key, { timeoutMs, maxHeld });
        run.stdout.write(
          `${key}: paused since ${new Date(pause.since).toISOString()}: new requests wait (each at most ${formatDuration(pause.timeoutMs)}, at most ${pause.maxHeld} at once; then 503 with Retry-After)\n`,
        );
        return 0;
      }),
    );
  proxy
    .command('resume <route>')
    .description('end a pause: the requests it held go on, in the order they came')
    .action(
      run.action(async (route: string) => {
        const { client, key } = await pausedRoute(run, route, stateDirOptions());
        const resumed = await client.resume(key);
        run.stdout.write(
          `${key}: resumed after ${formatDuration(resumed.durationMs)}: ${resumed.heldCount} requests held, released to ${resumed.releasedTo}; ${resumed.refused} answered 503, ${resumed.left} left while waiting\n`,
        );
        return 0;
      }),
    );
}

/** `cutover proxy routes`: the router's `GET /routes` for a person (certificates and their expiry included). */
function registerRoutes(proxy: Command, run: CommandRun): void {
  const stateDirOptions = () => proxy.opts<StateDirOptions>();
  proxy
    .command('routes')
    .description(
      'show what the router serves now: splits, addresses, holds, TLS certificates and their expiry',
    )
    .option('--json', "print the router's GET /routes answer as one JSON object")
    .addHelpText(
      'after',
      `
A certificate that expires within 14 days, or has expired, is flagged, and so is a certificate
file that could not be loaded again (the router serves the certificate it loaded before).

Example:
  $ cutover proxy routes --state-dir /srv/shop/.cutover`,
    )
    .action(
      run.action(async (options: { json?: boolean }) => {
        const { client } = await routerOf(run, stateDirOptions());
        const snapshot = await client.routes();
        run.stdout.write(
          options.json
            ? renderProxyRoutesJson(snapshot)
            : renderProxyRoutesText(snapshot, Date.now(), styleOf(run, run.stdout)),
        );
        return 0;
      }),
    );
}

/** The router client of the options' state directory, and `route` as the router's key. */
async function pausedRoute(run: CommandRun, route: string, options: StateDirOptions) {
  const { client, stateDir } = await routerOf(run, options);
  if (route.includes('/')) return { client, key: route };
  const keys = Object.keys((await client.routes()).routes).filter((key) => key.endsWith(`/${route}`));
  if (keys.length !== 1)
    throw new CutoverError(
      'USAGE',
      keys.length === 0
        ? `the router of ${stateDir.root} serves no route ${route}`
        : `route ${route} is served in several environments (${keys.join(', ')}): name one as <environment>/${route}`,
    );
  return { client, key: keys[0] as string };
}

/** The router client of the options' state directory. */
async function routerOf(run: CommandRun, options: StateDirOptions) {
  const stateDir = resolveStateDir(
    {
      ...(options.file === undefined ? {} : { file: pathIn(run, options.file) }),
      ...(options.stateDir === undefined ? {} : { stateDir: pathIn(run, options.stateDir) }),
    },
    run.env,
  );
  const { routerClient } = await import('../../router/client.js');
  return { client: routerClient(stateDir.root), stateDir };
}
