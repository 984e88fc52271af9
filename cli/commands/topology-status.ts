import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import type { EnvironmentStatus } from '../../core/environment-status.js';
import { CutoverError } from '../../core/errors.js';
import { parseDuration } from '../../core/topology/duration.js';
import type { MigrationService } from '../../engine/services/migration-service.js';
import { renderStatusJson, renderStatusLine, renderStatusText } from '../../views/render-status.js';
import { type CommandContext, type CommandRun, pathIn, styleOf } from '../context.js';
import { addServerOption, dashboardLine, type ServerOption, withService } from '../service.js';
import { addStateDirOptions, type StateDirOptions } from '../state-dir.js';

interface StatusOptions extends ServerOption, StateDirOptions {
  file: string;
  environment?: string;
  json?: boolean;
  watch?: boolean;
  interval: string;
}

/** Shortest redraw interval: each look observes every driver and probes every replica. */
const minIntervalMs = 200;

export function registerStatus(topology: Command, run: CommandRun): void {
  addServerOption(addStateDirOptions(topology.command('status')))
    .description(
      "show what runs in the file's environment: versions, replicas, health, routes, the migration in flight, drift",
    )
    .option(
      '--environment <name>',
      'the environment by its name, read no topology file (its state: --state-dir, CUTOVER_STATE_DIR or --server)',
    )
    .option('--json', 'print the status as one JSON object (ISO 8601 times)')
    .option('--watch', 'keep watching: redraw on a terminal, a line per change elsewhere; Ctrl-C ends it')
    .option('--interval <duration>', 'with --watch, how often to look again', '2s')
    .addHelpText(
      'after',
      `
The environment is the file's (metadata.name), or the one --environment names; what is recorded
comes from its state directory (.cutover/ beside the file, --state-dir, or CUTOVER_STATE_DIR), or
from a server with --server; with
WORKFLOW_HOST, from Temporal, and a \`cutover worker\` looks at what runs. Each replica is
looked at (process alive, port answering) and probed once with its HTTP or TCP health check.
Drift is what differs from the record: \`cutover topology migrate\` repairs it, and
\`cutover watch --self-heal\` or \`cutover server --self-heal\` do so by themselves.

Exit codes: 0 shown (drift or not), 1 error (an environment never migrated included).

Examples:
  $ cutover topology status -f examples/live-demo/topology.yaml
  $ cutover topology status --json | jq '.drift'
  $ CUTOVER_STATE_DIR=/var/lib/cutover cutover topology status --environment shop
  $ cutover topology status --watch --interval 1s`,
    )
    .action(run.action((options: StatusOptions) => runStatus(options, run)));
}

async function runStatus(options: StatusOptions, run: CommandRun): Promise<number> {
  const intervalMs = parseDuration(options.interval);
  if (intervalMs === undefined || intervalMs < minIntervalMs) {
    throw new CutoverError(
      'USAGE',
      `--interval: expected a duration of at least ${minIntervalMs}ms like 2s, not ${options.interval}`,
    );
  }
  const environment = options.environment ?? (await environmentOfFile(options, run));
  await withService(run, options, async (service) => {
    const first = await service.status(environment);
    if (!options.watch) {
      run.stdout.write(
        options.json ? renderStatusJson(first) : renderStatusText(first, styleOf(run, run.stdout)),
      );
      // On stderr, and not with --json (a script's output, whose stderr it may take for a problem).
      if (!options.json) run.stderr.write(dashboardLine(service, first.migration?.id));
      return;
    }
    if (!options.json) run.stderr.write(dashboardLine(service, first.migration?.id));
    await watchStatus(service, environment, first, { intervalMs, json: options.json === true }, run);
  });
  return 0;
}

/** The environment the topology file names (metadata.name). */
async function environmentOfFile(options: StatusOptions, run: CommandRun): Promise<string> {
  // Loaded when status runs, not when the CLI starts (see topology-validate.ts).
  const { TopologyInvalidError, validateTopologyText, readTopology } = await import('../../engine/api.js');
  let text: Awaited<ReturnType<typeof readTopology>>;
  try {
    text = await readTopology(pathIn(run, options.file), options.file);
  } catch (error) {
    // No file: the environment can be named instead (the state is all status reads).
    if (error instanceof CutoverError && error.code === 'TOPOLOGY_NOT_FOUND') {
      throw new CutoverError(
        'TOPOLOGY_NOT_FOUND',
        `${options.file}: no such file (pass the topology with -f FILE, or name its environment with --environment NAME)`,
      );
    }
    throw error;
  }
  const loaded = validateTopologyText(text);
  if (!loaded.ok) throw new TopologyInvalidError(loaded.diagnostics);
  return loaded.topology.metadata.name;
}

/** What a terminal that reports no size (0 × 0, as some CI and container terminals do) is drawn as. */
const fallbackColumns = 80;
const fallbackRows = 24;

/**
 * The terminal as log-update measures it: a size of 0 is taken as unknown, not as room for nothing
 * (log-update would cut every line of the view away and draw nothing at all).
 */
function sizedTerminal(stream: CommandContext['stdout']): NodeJS.WriteStream {
  return Object.create(stream, {
    columns: { get: () => stream.columns || fallbackColumns },
    rows: { get: () => stream.rows || fallbackRows },
    write: { value: stream.write.bind(stream) },
  }) as NodeJS.WriteStream;
}

/**
 * `--watch`: on a terminal the view is cleared and redrawn at each look (like
 * `kubectl argo rollouts get rollout --watch`); elsewhere one line (or, with --json, one JSON
 * object) is printed each time something changed, never a repeat. Ctrl-C (or SIGTERM) ends it with 0.
 */
async function watchStatus(
  service: MigrationService,
  environment: string,
  first: EnvironmentStatus,
  options: { intervalMs: number; json: boolean },
  context: CommandContext,
): Promise<void> {
  const { stdout } = context;
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  // `on`, not `once`: log-update's cursor restorer (signal-exit) kills the process with the signal
  // again when it finds no other listener, and a `once` listener is gone by the time it looks.
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const live = stdout.isTTY === true && !options.json;
  const style = styleOf(context, stdout);
  const { createLogUpdate } = await import('log-update');
  const update = live ? createLogUpdate(sizedTerminal(stdout)) : null;
  let last = '';
  const show = (status: EnvironmentStatus | null, problem: string | null) => {
    if (update) {
      const body = status === null ? '' : renderStatusText(status, style);
      const note = problem === null ? '' : `${style.red(`cutover: ${problem}`)}\n`;
      update(`${body}${note}${style.dim(`every ${options.intervalMs / 1000} s; Ctrl-C to stop`)}`);
      return;
    }
    // What changed, not when it was looked at: a quiet environment prints nothing new.
    const line =
      problem !== null
        ? `${new Date().toISOString()} cutover: ${problem}\n`
        : options.json
          ? `${JSON.stringify(status)}\n`
          : renderStatusLine(status as EnvironmentStatus);
    const key = problem ?? JSON.stringify({ ...status, observedAt: '' });
    if (key === last) return;
    last = key;
    stdout.write(line);
  };
  try {
    show(first, null);
    while (!stop.signal.aborted) {
      await sleep(options.intervalMs, undefined, { signal: stop.signal }).catch(() => undefined);
      if (stop.signal.aborted) break;
      try {
        show(await service.status(environment), null);
      } catch (error) {
        // Watching goes on through a failed look (a server restarting, a file mid-write).
        show(null, (error as Error).message.split('\n')[0] ?? String(error));
      }
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    update?.done();
  }
}
